-- +goose Up
-- The one RD gateway a Gateway token is for (R-GW4): the broker takes
-- the gateway's name from its credential, not from what its reports say.
-- Empty on the tokens issued before, whose gateway still names itself.
-- A column with a constant default is added without rewriting the table.
ALTER TABLE tokens ADD COLUMN gateway TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE tokens DROP COLUMN gateway;
