package postgres

// BusyWait is busyWait, for the tests of package postgres_test.
var BusyWait = busyWait
