-- Audit records imported from a single host's redb file keep the format they
-- were written in (`gatehouse db import`): a chain begun before format 2 holds
-- format-1 records, whose stored bytes are the record's JSON with `hash` as
-- its last field (the hash covers those bytes with the `hash` value emptied).
-- `content` keeps those bytes exactly; `format` says which rule verifies them.
-- The head's `format` is the last record's, so the next append after a chain
-- that ends in format 1 writes the marker record that starts format 2.
ALTER TABLE audit_records ADD COLUMN format smallint NOT NULL DEFAULT 2 CHECK (format IN (1, 2));
ALTER TABLE audit_head ADD COLUMN format smallint NOT NULL DEFAULT 2 CHECK (format IN (1, 2));


-- The fleet limiter's step, shortened (docs/decisions/fleet-limits.md has the
-- measurements). What it decides is unchanged; two things make one key's
-- turn on its rows shorter:
-- * Its commit does not wait for the WAL flush (`synchronous_commit = off`
--   for this transaction only). The rows' locks were held across that flush,
--   so one busy key's requests, fleet-wide, took turns at the disk's pace.
--   Durability still follows: WAL is flushed in order, so the first
--   synchronous commit after it (the request's outcome, on any host) makes
--   the count durable too. A crash of PostgreSQL itself (not a host, not a
--   clean restart) can lose the counts of the last fraction of a second
--   whose requests committed nothing after them; see the decision.
-- * The rows are locked and read in one statement, and the insert of missing
--   rows runs only when a window starts (most calls find all their rows).
CREATE OR REPLACE FUNCTION gatehouse_limit_take(p_key text, p_windows text[], p_ends timestamptz[], p_limits bigint[], p_mode text)
RETURNS TABLE (counts bigint[], allowed boolean, exceeded integer, first boolean)
LANGUAGE plpgsql AS $$
DECLARE
    c bigint[];
    found_rows integer;
    over integer := NULL;
    fresh bigint;
BEGIN
    IF p_mode = 'peek' THEN
        -- A read: no row made, none locked (a window not counted yet is 0), so
        -- the pre-check on a request's headers costs no write.
        SELECT array_agg(COALESCE(l.count, 0) ORDER BY t.ord) INTO c
        FROM unnest(p_windows) WITH ORDINALITY AS t(w, ord)
        LEFT JOIN limit_windows l ON l.key_id = p_key AND l.window_id = t.w;
    ELSE
        PERFORM set_config('synchronous_commit', 'off', true);
        -- Lock (in window_id order, the same in every caller: no cycles) and read.
        SELECT array_agg(l.count ORDER BY t.ord), count(*) INTO c, found_rows
        FROM unnest(p_windows) WITH ORDINALITY AS t(w, ord)
        JOIN (SELECT window_id, count FROM limit_windows
              WHERE key_id = p_key AND window_id = ANY(p_windows) ORDER BY window_id FOR UPDATE) l ON l.window_id = t.w;
        IF found_rows < array_length(p_windows, 1) THEN
            INSERT INTO limit_windows (key_id, window_id, ends_at)
            SELECT p_key, w, e FROM unnest(p_windows, p_ends) AS t(w, e)
            ON CONFLICT (key_id, window_id) DO NOTHING;
            GET DIAGNOSTICS fresh = ROW_COUNT;
            IF fresh > 0 THEN
                -- A window started: the key's windows that ended long ago go (an hour's
                -- margin keeps clocks that differ a little from racing on one row).
                DELETE FROM limit_windows WHERE key_id = p_key AND ends_at < now() - interval '1 hour';
            END IF;
            SELECT array_agg(l.count ORDER BY t.ord) INTO c
            FROM unnest(p_windows) WITH ORDINALITY AS t(w, ord)
            JOIN (SELECT window_id, count FROM limit_windows
                  WHERE key_id = p_key AND window_id = ANY(p_windows) ORDER BY window_id FOR UPDATE) l ON l.window_id = t.w;
        END IF;
    END IF;
    IF p_mode = 'rates' THEN
        UPDATE limit_windows SET count = limit_windows.count + 1 WHERE key_id = p_key AND window_id = ANY(p_windows);
        RETURN QUERY SELECT (SELECT array_agg(x + 1 ORDER BY o) FROM unnest(c) WITH ORDINALITY AS u(x, o)), true, NULL::integer, false;
        RETURN;
    END IF;
    FOR i IN REVERSE array_length(p_windows, 1)..1 LOOP
        IF c[i] >= p_limits[i] THEN
            over := i;
            EXIT;
        END IF;
    END LOOP;
    IF over IS NOT NULL THEN
        UPDATE limit_windows SET reported = true WHERE key_id = p_key AND window_id = p_windows[over] AND NOT reported;
        GET DIAGNOSTICS fresh = ROW_COUNT;
        RETURN QUERY SELECT c, false, over, fresh > 0;
        RETURN;
    END IF;
    IF p_mode = 'count' THEN
        UPDATE limit_windows SET count = limit_windows.count + 1 WHERE key_id = p_key AND window_id = ANY(p_windows);
        c := (SELECT array_agg(x + 1 ORDER BY o) FROM unnest(c) WITH ORDINALITY AS u(x, o));
    END IF;
    RETURN QUERY SELECT c, true, NULL::integer, false;
END
$$;
