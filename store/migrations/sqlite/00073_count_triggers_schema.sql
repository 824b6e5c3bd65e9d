-- +goose Up
-- Nothing on SQLite: PostgreSQL's 00073 makes its count triggers'
-- functions look in their own schema; a SQLite trigger names tables of
-- its own database only. Numbered alike so both dialects' versions stay
-- one list.
SELECT 1;

-- +goose Down
SELECT 1;
