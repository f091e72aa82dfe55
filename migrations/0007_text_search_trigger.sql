-- One full-text parse of a memory's body per write instead of two (decision 0008).
--
-- `fts` and `doc_len` were stored generated columns, and each parsed the body
-- (user_message || ' ' || ai_response) with to_tsvector on its own: about 50 us per parse for a
-- chat turn of ~300 characters, most of a bulk import's time in the server. A generated column
-- cannot read another one, so a BEFORE trigger now computes both from one parse. The values are
-- exactly those of the generated expressions (same functions, same order of concatenation), so
-- no stored row changes: DROP EXPRESSION keeps each row's value and makes the columns plain.

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
