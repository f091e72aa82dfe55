-- One turn is written in one round trip (decision 0009).
--
-- `MemoryStore.add_turn` opened a transaction, set the row-level security key, inserted, and
-- committed: four round trips, plus a fifth (the stored turn's id) when the turn was already
-- there. recall.add_memory does the same in one call, as the searches of migration 0005 do:
-- it sets the key itself, inserts the turn unless the user already has one with the same
-- content hash, and returns the stored turn's id and time either way, with whether this call
-- inserted it. One statement is one transaction, so it is as atomic as before; at READ
-- COMMITTED the second SELECT sees a turn that a concurrent call committed first, as the
-- second statement of the old transaction did. No row comes back only when the turn was
-- erased between the two statements.

CREATE FUNCTION recall.add_memory(
    p_user_id text, p_conversation_id text, p_user_message text, p_ai_response text,
    p_created_at timestamptz, p_metadata jsonb, p_content_hash bytea, p_embedding vector,
    p_embedding_model text, p_kind text
) RETURNS TABLE (memory_id uuid, memory_created_at timestamptz, inserted boolean)
LANGUAGE plpgsql AS $$
DECLARE
    previous text := recall.swap_user_key(p_user_id);
BEGIN
    RETURN QUERY
    INSERT INTO recall.memories AS m (
        user_id, conversation_id, user_message, ai_response, created_at, metadata,
        content_hash, embedding, embedding_model, kind
    )
    VALUES (
        p_user_id, p_conversation_id, p_user_message, p_ai_response,
        coalesce(p_created_at, now()), p_metadata, p_content_hash, p_embedding,
        p_embedding_model, p_kind
    )
    ON CONFLICT (user_id, content_hash) DO NOTHING
    RETURNING m.id, m.created_at, true;
    IF NOT FOUND THEN
        RETURN QUERY
        SELECT m.id, m.created_at, false
        FROM recall.memories AS m
        WHERE m.user_id = p_user_id AND m.content_hash = p_content_hash;
    END IF;
    PERFORM recall.swap_user_key(previous);
END;
$$;

DO $$
BEGIN
    IF to_regrole('recall_app') IS NOT NULL THEN
        GRANT EXECUTE ON FUNCTION recall.add_memory(
            text, text, text, text, timestamptz, jsonb, bytea, vector, text, text
        ) TO recall_app;
    END IF;
END
$$;
