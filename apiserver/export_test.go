package apiserver

// TaskName is taskName for the external tests: the VideoTask (and hold) name of a key.
var TaskName = taskName
