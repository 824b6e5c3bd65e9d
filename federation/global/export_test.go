package global

// DirectoryRetry is directoryRetry, for the tests of package global_test.
const DirectoryRetry = directoryRetry
