// Package connectors verifies and normalizes payment-processor webhooks.
//
// A webhook arrives as a [Request] (raw body bytes, headers, URI). A
// [Connector] for the processor authenticates it against one or more
// secrets ([Connector.Verify]) and maps it onto the shared [Event] model
// ([Connector.Parse]). [Handle] ties the two together: look up the connector
// by name, verify, parse, then choose the merchant event id used for
// de-duplication.
//
// The connectors live in subpackages (connectors/stripe, connectors/adyen,
// ...). They do not register themselves: import connectors/all for a
// registry holding every connector with its default options, or build a
// [Registry] from connectors you configured yourself.
//
// Every function here is safe for hostile input: bad input yields an
// *[AuthError] or *[ParseError], never a panic.
package connectors
