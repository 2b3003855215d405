"""What a run leaves behind: check results, shrunk cases, reports and summaries, reproducers, corpus
entries and campaign records."""
