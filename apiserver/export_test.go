package apiserver

// TaskName is taskName for the external tests: the VideoTask (and hold) name of a key.
var TaskName = taskName

// FieldLimits ties each length-limited request field to the CRD field that stores it.
var FieldLimits = fieldLimits

// IdempotencyKey is idempotencyKey for the external tests: the key of a request, or its 400.
var IdempotencyKey = idempotencyKey
