-- Memories made of the user's own words (issue 45, decision 0038).
--
-- A reply quotes the memories the agent was handed ("since Mia is allergic to peanuts, ..."),
-- and a turn indexed with its whole reply is found by the quoted fact's words, as well as or
-- before the turn that said it. The writer now records the reply's own part, the reply less
-- the sentences that restate what it quotes, in the metadata under "recall" ("own";
-- recall.search.provenance), and the full-text body is the user text and that part:
-- user_message || ' ' || (the own part where one is recorded, else ai_response). The title and
-- entity weights are those of migration 0007, unchanged; so is the trigger, which already runs
-- on every update of metadata: `recall reembed` writes "own" into rows stored before this file
-- (recall.db.ownwords), and this function recomputes their `fts` and `doc_len` then.
--
-- Only a JSON string counts as the own part (a null, recorded where the reply quotes something
-- but keeps every sentence, or anything else there, leaves the reply whole): the same rule as
-- recall.memory.own_words, which gives the text embedded for the turn.
--
-- No row changes here: rows stored before this file have no "own" and keep their values. On
-- Citus the function is the trigger's, which the workers' shards run: CREATE OR REPLACE of a
-- function Citus distributed with the table reaches every worker.
CREATE OR REPLACE FUNCTION recall.memories_text_search() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    body tsvector := to_tsvector(
        'english'::regconfig,
        NEW.user_message || ' ' || CASE
            WHEN jsonb_typeof(NEW.metadata #> '{recall,own}') = 'string'
                THEN NEW.metadata #>> '{recall,own}'
            ELSE NEW.ai_response
        END
    );
BEGIN
    NEW.doc_len := recall.tsvector_tokens(body);
    NEW.fts := setweight(
            to_tsvector('english'::regconfig, coalesce(NEW.metadata ->> 'title', '')), 'A'
        )
        || setweight(
            to_tsvector(
                'english'::regconfig,
                coalesce(NEW.metadata ->> 'entities_text', '') || ' '
                || coalesce(NEW.metadata ->> 'key_phrases_text', '')
            ),
            'B'
        )
        || body;
    RETURN NEW;
END;
$$;
