"""The benchmarks' harness, their shared library. Each script under benchmarks/ answers one
question; what more than one of them needs lives here, never in another script:

- `harness.run`: the entry point (logging as deployed) and the command line;
- `harness.db`: a fresh database per run (or one kept between runs), settling a table after a
  load;
- `harness.corpus`: the LoCoMo file (turn pairs and questions);
- `harness.regimes`: LoCoMo's questions asked of the whole conversation, of small users and
  after each was asked once before (who holds which memories, what each question should
  find);
- `harness.silence`: messages no memory answers (other conversations' questions renamed, small
  talk) asked of those users, and the threshold sweep;
- `harness.heldout`: the held-out data under benchmarks/data (small talk, the paraphrase probe) and
  the check that a question shares no content word with its fact;
- `harness.factusers`: issue 45's fact users (benchmarks/data/fact_users.json), split into users
  that may be fitted on and users that are only measured;
- `harness.data`: skewed synthetic users with LoCoMo texts and clustered vectors, loaded through
  `MemoryStore.add_turns`, with queries and their exact answers;
- `harness.items`: LangGraph store items in namespaces of skewed sizes, with clustered vectors
  handed to the stores by an `embed` that looks them up, queries and their exact answers;
- `harness.vectorcache`: vectors embedded once and kept under .recall/, by kind and text hash
  (`same_results.py`, `realmem.py`; `harness.longmemeval` keeps its own keys in the same files);
- `harness.timing`: timed calls, compared systems taking turns, percentiles;
- `harness.report`: Markdown tables and the script's section of docs/benchmarks.md;
- `harness.standby`: a throw-away primary and streaming standby (`benchmarks/replica.py`, and the
  read-replica tests, which find the harness through pytest's `pythonpath`).
"""
