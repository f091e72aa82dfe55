"""Ranking: how candidates become an ordered list, with no I/O.

One ranker interface (`rankers`: `Ranker.rank(query, candidates)`), its models as package data under
`models/<kind>/<name>.json`: the default ranking, the learned second stage and its gate over the
candidates (`second_stage`, over `candidates` and `features`, its models `linear` and `trees`), and
the fusion used for embedders without one (`fusion`, its lists merged by `ranking`). BM25 as a 0-1
feature (`bm25`; BM25 itself is SQL), keyword query parsing (`keywords`), what follows ranking
(`restatements`, `provenance`, `slots`), the time a message names (`when`), unanswered questions
left out (`echo`) and the optional re-ranker of your own (`rerank`). The retrieval modes are
`recall.config`'s. May import the bottom floor only (`recall.config`, `recall.errors`,
`recall.memory`).
"""
