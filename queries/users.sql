-- name: InsertUser :one
-- Creates a founder with their starting credits.
INSERT INTO users (email, password_hash, credits)
VALUES (@email, @password_hash, @credits)
RETURNING *;

-- name: GetUserByID :one
SELECT * FROM users WHERE id = @id;

-- name: GetUserByEmail :one
SELECT * FROM users WHERE email = @email;
