-- +goose Up
-- Every reconcile writes the verification time of every sandbox the provider agrees with (one
-- UPDATE for all of them, docs/architecture.md, "Reconcile"). With full pages no new row
-- version fits beside the old one, so each went to another page and into every one of the
-- table's nine indexes: 3.2-8.6 s for 100,000 rows. Half-empty pages keep each new version
-- on its own page (a HOT update: no index is touched, the old version is pruned on the next
-- visit), 0.4-0.6 s for the same rows. Pages written before this fill up to the new limit as
-- their rows move.
ALTER TABLE sandboxes SET (fillfactor = 50);

-- +goose Down
ALTER TABLE sandboxes RESET (fillfactor);
