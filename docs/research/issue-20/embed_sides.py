"""bge-small vectors of each side of a record (user_message, ai_response) separately:
a per-field dense feature. Cached to cache/emb_sides.npz."""
import numpy as np
from data import load
from models import BGE
records, questions, *_ = load()
b = BGE(threads=2)
u = b.documents([r["user_message"] for r in records] + [q["text"] for q in questions])
a = b.documents([r["ai_response"] for r in records] + ["I'm not sure."] * len(questions))
np.savez("cache/emb_sides.npz", bge_u=u, bge_a=a)
print(u.shape, a.shape)
