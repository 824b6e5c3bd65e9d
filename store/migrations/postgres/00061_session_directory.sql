-- +goose Up
-- The session directory (R-G1): for the users this pod is the directory
-- pod of (federation.DirectoryPod), which pods hold their open sessions,
-- as those pods registered them. A global connect asks the user's
-- directory pod instead of every pod in scope. session_directory_pods
-- counts each pod's entries (bounded, vdibroker.MaxDirectoryEntriesPerPod)
-- and records when its whole list last arrived, at which generation of
-- its document: a pod without a fresh whole list is asked itself.
CREATE TABLE session_directory (
    user_key  TEXT COLLATE "C" NOT NULL,
    pod       TEXT COLLATE "C" NOT NULL,
    seen_time BIGINT NOT NULL,
    PRIMARY KEY (user_key, pod)
);
CREATE INDEX session_directory_by_pod ON session_directory (pod, seen_time);
CREATE TABLE session_directory_pods (
    pod           TEXT COLLATE "C" PRIMARY KEY,
    entries       BIGINT NOT NULL DEFAULT 0,
    generation    BIGINT NOT NULL DEFAULT 0,
    complete_time BIGINT NOT NULL DEFAULT 0
);

-- +goose Down
DROP TABLE session_directory_pods;
DROP TABLE session_directory;
