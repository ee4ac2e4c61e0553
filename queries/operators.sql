-- name: InsertOperator :execrows
-- Zero rows: the account already was an operator.
INSERT INTO operators (user_id, added_by) VALUES (@user_id, @added_by) ON CONFLICT (user_id) DO NOTHING;

-- name: DeleteOperator :execrows
DELETE FROM operators WHERE user_id = @user_id;

-- name: IsOperator :one
SELECT EXISTS (SELECT 1 FROM operators WHERE user_id = @user_id)::boolean;

-- name: InsertOperatorLog :exec
INSERT INTO operator_log (action, actor_id, actor, user_id, sandbox_id)
VALUES (@action, sqlc.narg('actor_id'), @actor, sqlc.narg('user_id'), sqlc.narg('sandbox_id'));

-- name: ListOperatorLog :many
SELECT * FROM operator_log ORDER BY id DESC LIMIT @max_rows;
