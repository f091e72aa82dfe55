-- One full-text parse of a memory's body per write instead of two (decision 0008).
--
-- `fts` and `doc_len` were stored generated columns, and each parsed the body
-- (user_message || ' ' || ai_response) with to_tsvector on its own: about 50 us per parse for a
-- chat turn of ~300 characters, most of a bulk import's time in the server. A generated column
-- cannot read another one, so a BEFORE trigger now computes both from one parse. The values are
-- exactly those of the generated expressions (same functions, same order of concatenation), so
-- no stored value changes: DROP EXPRESSION keeps each row's value and makes the columns plain.
--
-- `fts` also stays in the row now (storage MAIN, as the vector since 0006): the keyword search
-- reads it for every matching row, several times, and out of line each read was a TOAST fetch
-- (LoCoMo keyword search 3.1 -> 7.7 ms p50 once the vector took its place in the row).
-- The texts and the metadata are what goes out of line first.

ALTER TABLE recall.memories
    ALTER COLUMN fts DROP EXPRESSION,
    ALTER COLUMN doc_len DROP EXPRESSION;

CREATE FUNCTION recall.memories_text_search() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    body tsvector := to_tsvector('english'::regconfig, NEW.user_message || ' ' || NEW.ai_response);
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

-- Every insert, and every update of a column the two values derive from (or of the values
-- themselves, so that they cannot be set to anything else).
CREATE TRIGGER memories_text_search
    BEFORE INSERT OR UPDATE OF user_message, ai_response, metadata, fts, doc_len
    ON recall.memories
    FOR EACH ROW EXECUTE FUNCTION recall.memories_text_search();

ALTER TABLE recall.memories ALTER COLUMN fts SET STORAGE MAIN;

-- Rows stored before this migration and 0006: rewrite those whose vector or tsvector is out of
-- line, so that both are stored the new way. Assigning a value its own value would keep its
-- TOAST pointer; the cast builds a new vector, and the trigger above computes a new `fts`
-- (it runs on any update of `fts`). PostgreSQL 17+ can tell which rows are out of line
-- (pg_column_toast_chunk_id); on 15 and 16 every row is rewritten once.
DO $$
BEGIN
    IF current_setting('server_version_num')::integer >= 170000 THEN
        UPDATE recall.memories SET embedding = embedding::real[]::vector, fts = NULL
        WHERE pg_column_toast_chunk_id(embedding) IS NOT NULL
           OR pg_column_toast_chunk_id(fts) IS NOT NULL;
    ELSE
        UPDATE recall.memories SET embedding = embedding::real[]::vector, fts = NULL;
    END IF;
END
$$;
