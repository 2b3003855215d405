"""Driving the pipeline: the runner (replay, search, shrink, record), the judge of one case, the
hypothesis search, fuzz targets, shards and the shared example database."""
