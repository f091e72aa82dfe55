"""Ranking: how candidates become an ordered list, with no I/O.

Owns the retrieval modes (`modes`), keyword query parsing (`keywords`), the default ranking: the
learned second stage and its gate over the candidates (`candidates`, `features`,
`second_stage`, with its fitted weights as package data), the fusion used for embedders without
one (`fusion`, `ranking`), unanswered questions left out (`echo`) and the optional re-ranker of
your own (`rerank`).
May import the bottom floor only (`recall.config`, `recall.errors`, `recall.memory`).
"""
