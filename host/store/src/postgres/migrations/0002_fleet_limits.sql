-- Fleet-wide rate limits and quotas: one row per key and window (minute,
-- hour, day, month; the window's name says which and when), taken by
-- gatehouse_limit_take in one statement, so every host of a fleet counts
-- against the same rows and a window admits exactly its limit.
CREATE TABLE limit_windows (
    key_id    text        NOT NULL,
    window_id text        NOT NULL,
    ends_at   timestamptz NOT NULL,
    count     bigint      NOT NULL DEFAULT 0 CHECK (count >= 0),
    -- The first refusal in this window was reported (api:limit_reached fires once fleet-wide).
    reported  boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (key_id, window_id)
);
CREATE INDEX limit_windows_ends_at ON limit_windows (ends_at);

-- Check and count one request against a key's windows, atomically.
-- p_windows are listed in the order their windows reset (the last one
-- resets last); p_limits are their limits. p_mode:
--   'count': if every window is under its limit, add 1 to each (allowed);
--   'peek':  decide the same from the counts as they are, count nothing (no lock:
--            a pre-check, which the counting step that follows decides again);
--   'rates': add 1 to each window given, over its limit or not, decide nothing.
-- A refusal names the window that resets last among those at their limit,
-- and says whether it is the first refusal in that window, fleet-wide.
-- The rows are locked in window_id order, the same in every caller: two
-- transactions never wait on each other in a cycle.
CREATE FUNCTION gatehouse_limit_take(p_key text, p_windows text[], p_ends timestamptz[], p_limits bigint[], p_mode text)
RETURNS TABLE (counts bigint[], allowed boolean, exceeded integer, first boolean)
LANGUAGE plpgsql AS $$
DECLARE
    c bigint[];
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
        INSERT INTO limit_windows (key_id, window_id, ends_at)
        SELECT p_key, w, e FROM unnest(p_windows, p_ends) AS t(w, e)
        ON CONFLICT (key_id, window_id) DO NOTHING;
        GET DIAGNOSTICS fresh = ROW_COUNT;
        IF fresh > 0 THEN
            -- A window started: the key's windows that ended long ago go (an hour's
            -- margin keeps clocks that differ a little from racing on one row).
            DELETE FROM limit_windows WHERE key_id = p_key AND ends_at < now() - interval '1 hour';
        END IF;
        PERFORM 1 FROM limit_windows WHERE key_id = p_key AND window_id = ANY(p_windows) ORDER BY window_id FOR UPDATE;
        SELECT array_agg(l.count ORDER BY t.ord) INTO c
        FROM unnest(p_windows) WITH ORDINALITY AS t(w, ord)
        JOIN limit_windows l ON l.key_id = p_key AND l.window_id = t.w;
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
