-- +goose Up
-- etag_clock holds the last update time issued to a host pool, an
-- application group, an application or a scaling plan (R-E13): each
-- write of one takes a time past it, so no two writes share an ETag, not
-- even an object's last one and the first of the object created again
-- under its name after a delete (by a replica whose clock is behind, or
-- whose clock ticks coarsely). It starts at the last update time stored.
CREATE TABLE etag_clock (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    last BIGINT NOT NULL
);
INSERT INTO etag_clock (id, last)
SELECT 1, max(t) FROM (
    SELECT coalesce(max(update_time), 0) AS t FROM host_pools
    UNION ALL SELECT coalesce(max(update_time), 0) FROM application_groups
    UNION ALL SELECT coalesce(max(update_time), 0) FROM applications
    UNION ALL SELECT coalesce(max(update_time), 0) FROM scaling_plans
) times;

-- +goose Down
DROP TABLE etag_clock;
