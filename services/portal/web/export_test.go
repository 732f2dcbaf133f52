package web

// ByteSize is byteSize, for tests to write what a page shows.
var ByteSize = byteSize
