package connectors

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Handle authenticates and normalizes a webhook with the connector
// registered under connectorName in the default registry (see
// connectors/all). See HandleWith for the steps.
func Handle(ctx context.Context, connectorName string, req *Request, secrets [][]byte, merchantEventID string, now time.Time) (*Event, error) {
	return defaultRegistry.Handle(ctx, connectorName, req, secrets, merchantEventID, now)
}

// Handle is the package-level Handle, looking the connector up in r.
func (r *Registry) Handle(ctx context.Context, connectorName string, req *Request, secrets [][]byte, merchantEventID string, now time.Time) (*Event, error) {
	c, err := r.Lookup(connectorName)
	if err != nil {
		return nil, err
	}
	return HandleWith(ctx, c, req, secrets, merchantEventID, now)
}

// HandleWith verifies req with c, parses it, and fills MerchantEventID:
// merchantEventID when non-empty, else the processor's event id, else
// "sha256:" + hex(sha256(body)). Nothing from the body is parsed or trusted
// before the signature has been verified.
func HandleWith(ctx context.Context, c Connector, req *Request, secrets [][]byte, merchantEventID string, now time.Time) (*Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c == nil {
		return nil, fmt.Errorf("%w: nil connector", ErrUnknownConnector)
	}
	// Checked here as well as in each Verify so that no connector can
	// accept a webhook without a secret.
	if !hasSecret(secrets) {
		return nil, &AuthError{Connector: c.Name(), Reason: "no webhook secret configured"}
	}
	if req == nil {
		return nil, &ParseError{Connector: c.Name(), Err: errors.New("no request")}
	}
	if err := c.Verify(req, secrets, now); err != nil {
		return nil, err
	}
	ev, err := c.Parse(req)
	if err != nil {
		return nil, err
	}
	if ev == nil { // a connector bug; never hand back a nil event
		return nil, &ParseError{Connector: c.Name(), Err: errors.New("connector returned no event")}
	}
	bodyID := BodyHash(req.Body)
	finish(ev, c.Name(), merchantEventID, bodyID)
	for i := range ev.Items {
		finish(&ev.Items[i], c.Name(), "", bodyID+"#"+strconv.Itoa(i))
	}
	return ev, nil
}

// finish stamps the fields every connector shares.
func finish(ev *Event, connector, callerID, fallbackID string) {
	ev.Connector = connector
	switch {
	case callerID != "":
		ev.MerchantEventID = callerID
	case ev.MerchantEventID == "":
		ev.MerchantEventID = fallbackID
	}
	ev.Complete = ev.isComplete()
}

// BodyHash is the fallback merchant event id: "sha256:" and the hex SHA-256
// of the raw body. Identical redeliveries hash alike, so they de-duplicate.
func BodyHash(body []byte) string {
	sum := sha256.Sum256(body)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func hasSecret(secrets [][]byte) bool {
	for _, s := range secrets {
		if len(s) > 0 {
			return true
		}
	}
	return false
}
