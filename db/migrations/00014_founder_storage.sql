-- +goose Up
-- What each founder stores (docs/architecture.md, "Versions"): the bytes of their unique
-- content (blobs), which the storage quota bounds. The database keeps the sum itself, on every
-- insert and delete of content whatever the statement (a version's new files, retention's
-- collection, an account's removal), so no writer can forget it. A version's writer locks the
-- founder's row first (LockFounderStorage): two versions of one founder, in two projects, are
-- checked against the quota one after the other.
CREATE TABLE founder_storage (
    owner_id     uuid PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    stored_bytes bigint NOT NULL DEFAULT 0 CHECK (stored_bytes >= 0)
);
INSERT INTO founder_storage (owner_id, stored_bytes)
SELECT u.id, coalesce((SELECT sum(octet_length(b.content)) FROM blobs b WHERE b.owner_id = u.id), 0)
FROM users u;

-- +goose StatementBegin
-- One statement's content, summed per founder (its transition table), not a row at a time: a
-- version of 1,000 files moves its founder's sum once.
CREATE FUNCTION founder_storage_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO founder_storage AS f (owner_id, stored_bytes)
        SELECT owner_id, sum(octet_length(content)) FROM new_blobs GROUP BY owner_id
        ON CONFLICT (owner_id) DO UPDATE SET stored_bytes = f.stored_bytes + excluded.stored_bytes;
    ELSE
        UPDATE founder_storage f SET stored_bytes = f.stored_bytes - o.bytes
        FROM (SELECT owner_id, sum(octet_length(content)) AS bytes FROM old_blobs GROUP BY owner_id) o
        WHERE f.owner_id = o.owner_id;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER founder_storage_insert AFTER INSERT ON blobs REFERENCING NEW TABLE AS new_blobs
    FOR EACH STATEMENT EXECUTE FUNCTION founder_storage_count();
CREATE TRIGGER founder_storage_delete AFTER DELETE ON blobs REFERENCING OLD TABLE AS old_blobs
    FOR EACH STATEMENT EXECUTE FUNCTION founder_storage_count();

-- +goose Down
DROP TRIGGER founder_storage_delete ON blobs;
DROP TRIGGER founder_storage_insert ON blobs;
DROP FUNCTION founder_storage_count();
DROP TABLE founder_storage;
