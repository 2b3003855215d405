"""Judgement: which opinions run, how two outcomes compare, what each outcome shows on its own, and the
verdict of a case (a pure function of the evidence)."""
