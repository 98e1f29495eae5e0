package paymentevents

// NewFileSinksEvery is NewFileSinks looking at the file at most once per interval (0: on every
// call), so that tests follow a change without waiting.
var NewFileSinksEvery = newFileSinks
