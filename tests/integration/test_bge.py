"""bge-small-en-v1.5, the default model, from the files packaged with recall: checked files, a
clear error when they are missing, and a new user's paraphrased questions finding the right
memory first."""

from __future__ import annotations

import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from recall.config import Settings
from recall.embeddings import BgeSmallEmbeddings, configured_embeddings
from recall.embeddings.bge import BGE_ONNX_SHA256, BGE_TOKENIZER_SHA256, packaged_model_files
from recall.embeddings.embedder import file_sha256
from recall.errors import EmbeddingError
from recall.store import MemoryStore
from tests.conftest import Databases

pytestmark = pytest.mark.model

FACTS = {
    "sister": "My sister Ana lives in Lisbon and I visit her every June",
    "job": "I work as a nurse at St. Mary's hospital, mostly night shifts",
    "band": "My favourite band is Radiohead; I saw them live in 2017",
    "allergy": "I'm allergic to peanuts, so I always carry an EpiPen",
}
# questions that share no content word with the fact that answers them
QUESTIONS = {
    "Where does my sister live?": "sister",
    "What do I do for a living?": "job",
    "Which concert did I go to?": "band",
    "Can you suggest a snack for me?": "allergy",
}


@pytest.fixture(scope="module")
def bge() -> BgeSmallEmbeddings:
    return BgeSmallEmbeddings()


def test_vectors_are_normalized_and_queries_carry_the_instruction(
    bge: BgeSmallEmbeddings,
) -> None:
    [doc] = bge.embed_documents(["Where does my sister live?"])
    query = bge.embed_query("Where does my sister live?")
    assert len(doc) == len(query) == 384
    assert np.isclose(np.linalg.norm(doc), 1.0) and np.isclose(np.linalg.norm(query), 1.0)
    assert not np.allclose(doc, query)  # the retrieval instruction goes before queries only
    assert bge.embed_query("Where does my sister live?") == query  # deterministic


def test_a_texts_vector_does_not_depend_on_the_texts_embedded_with_it(
    bge: BgeSmallEmbeddings,
) -> None:
    """The int8 graph quantizes with one scale per forward pass: in a batch, a text's vector
    moved with its neighbours (up to 0.016 per component), so a memory's vector depended on
    whether it came alone (`add_turn`) or among others (`add_turns`, `recall reembed`)."""
    text = "Where does my sister live?"
    [alone] = bge.embed_documents([text])
    for others in (["Where does my uncle work?"], ["Hi"], [" ".join(FACTS.values())]):
        in_batch = bge.embed_documents([text, *others])[0]
        # exact: the same forward pass on the same tokens, whatever came with them
        assert in_batch == alone, others


@pytest.mark.parametrize("spin", [False, True])
def test_onnx_runtimes_threads_sleep_between_calls_unless_asked_to_spin(spin: bool) -> None:
    model = BgeSmallEmbeddings(spin=spin)
    model.embed_query("warm-up")
    options = model._session.get_session_options()
    key = "session.intra_op.allow_spinning"
    if spin:  # ONNX Runtime's own default: the entry is not set
        with pytest.raises(RuntimeError):
            options.get_session_config_entry(key)
    else:
        assert options.get_session_config_entry(key) == "0"


def test_one_thread_a_call_by_default_and_the_same_vectors_with_two() -> None:
    one, two = BgeSmallEmbeddings(), BgeSmallEmbeddings(threads=2)
    texts = ["Where does my sister live?", " ".join(FACTS.values()), "hi"]
    assert one.embed_documents(texts) == two.embed_documents(texts)
    assert one.embed_query("What's my job?") == two.embed_query("What's my job?")
    assert one._session.get_session_options().intra_op_num_threads == 1
    assert two._session.get_session_options().intra_op_num_threads == 2


def test_a_swapped_file_is_refused(tmp_path: Path) -> None:
    for packaged in packaged_model_files():
        shutil.copy(str(packaged), tmp_path / packaged.name)
    with (tmp_path / "tokenizer.json").open("ab") as fh:
        fh.write(b" ")
    with pytest.raises(EmbeddingError, match="sha256 mismatch"):
        BgeSmallEmbeddings(tmp_path).embed_query("hello")


def test_a_missing_file_says_how_to_get_it_back(tmp_path: Path) -> None:
    _, tokenizer = packaged_model_files()
    shutil.copy(str(tokenizer), tmp_path / tokenizer.name)  # no ONNX graph beside it
    with pytest.raises(EmbeddingError, match=re.escape("reinstall langgraph-recall")):
        BgeSmallEmbeddings(tmp_path).embed_query("hello")


def test_the_packaged_files_are_the_pinned_release() -> None:
    onnx, tokenizer = packaged_model_files()
    assert file_sha256(Path(str(onnx))) == BGE_ONNX_SHA256
    assert file_sha256(Path(str(tokenizer))) == BGE_TOKENIZER_SHA256


def test_the_setting_selects_it() -> None:
    model = configured_embeddings(Settings(embedding_model="bge-small-en-v1.5"))
    assert isinstance(model, BgeSmallEmbeddings) and not model.loaded


@pytest.fixture(scope="module")
async def bge_store(databases: Databases) -> AsyncIterator[MemoryStore]:
    url = await databases.create("recall_bge")
    async with MemoryStore.connect(
        Settings(database_url=url, embedding_model="bge-small-en-v1.5")
    ) as store:
        yield store


@pytest.mark.parametrize(("question", "answer"), QUESTIONS.items())
async def test_a_new_user_finds_the_fact_behind_a_paraphrase(
    bge_store: MemoryStore, question: str, answer: str
) -> None:
    user = "new-user"
    await bge_store.add_turns(
        {"user_id": user, "user_message": text, "ai_response": "Noted."} for text in FACTS.values()
    )
    [best, *_] = await bge_store.search(
        user, question, limit=3, similarity_threshold=0.0, mode="semantic"
    )
    assert best.user_message == FACTS[answer]
