package main

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

// tokenKeys checks a bearer token's signature against the cluster's service account issuer
// keys (the kube-apiserver's OIDC discovery: /.well-known/openid-configuration for the issuer,
// /openid/v1/jwks for its keys). It does not authenticate anyone: the TokenReview stays the
// authority (a deleted pod or secret revokes a token whose signature is still good). It only
// says whose reviews a new token spends: a validly signed one its subject's, which a flooder
// cannot forge (each real token it holds costs it a TokenRequest of its own account), anything
// else its caller address's, which a flooder sharing the address (a mesh's 127.0.0.6, a NAT)
// drains. Keys that cannot be fetched (no RBAC, an outage, a cluster without discovery) leave
// every token unverified: the address's reviews, as before there were keys.
type tokenKeys struct {
	rc    rest.Interface
	clock clock.PassiveClock
	log   logr.Logger

	mu      sync.Mutex
	issuer  string
	keys    jose.JSONWebKeySet
	fetched time.Time // when the keys were last asked for; zero: never
	failed  bool      // the last fetch failed (and was logged)
}

const (
	// keysRefetchEvery is how often a token naming a key not known makes the keys be asked for
	// again (the issuer's keys rotated): anyone can send made-up key ids.
	keysRefetchEvery = 5 * time.Second
	keysFetchTimeout = 5 * time.Second
)

// The algorithms the kube-apiserver signs service account tokens with.
var tokenAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.ES512}

// newTokenKeys fetches the issuer's keys (and logs, not fails, if it cannot).
func newTokenKeys(ctx context.Context, rc rest.Interface, clk clock.PassiveClock, log logr.Logger) *tokenKeys {
	k := &tokenKeys{rc: rc, clock: clk, log: log}
	k.mu.Lock()
	k.fetched = clk.Now()
	k.mu.Unlock()
	k.fetch(ctx)
	return k
}

// subject is the subject of token if it is signed by a key of the cluster's issuer, with that
// issuer, and not expired; else ok is false.
func (k *tokenKeys) subject(ctx context.Context, token string) (sub string, ok bool) {
	tok, err := jwt.ParseSigned(token, tokenAlgorithms)
	if err != nil || len(tok.Headers) != 1 || tok.Headers[0].KeyID == "" {
		return "", false
	}
	key, issuer := k.key(ctx, tok.Headers[0].KeyID)
	if key == nil || issuer == "" {
		return "", false
	}
	var claims jwt.Claims
	if tok.Claims(key, &claims) != nil || claims.Subject == "" || claims.Expiry == nil {
		return "", false
	}
	// The leeway (a minute) is for the clocks of the manager's and the kube-apiserver's nodes:
	// a token just issued must not look issued in the future.
	if claims.ValidateWithLeeway(jwt.Expected{Issuer: issuer, Time: k.clock.Now()}, jwt.DefaultLeeway) != nil {
		return "", false
	}
	return claims.Subject, true
}

// key is the issuer's key kid and the issuer, fetched again first if kid is not known and the
// keys were not asked for in the last keysRefetchEvery.
func (k *tokenKeys) key(ctx context.Context, kid string) (*jose.JSONWebKey, string) {
	k.mu.Lock()
	key, issuer := k.find(kid)
	now := k.clock.Now()
	refetch := key == nil && !now.Before(k.fetched.Add(keysRefetchEvery))
	if refetch {
		k.fetched = now
	}
	k.mu.Unlock()
	if !refetch {
		return key, issuer
	}
	k.fetch(ctx)
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.find(kid)
}

// find is kid's key and the issuer; call it with mu held.
func (k *tokenKeys) find(kid string) (*jose.JSONWebKey, string) {
	for _, key := range k.keys.Key(kid) {
		if key.Valid() && key.IsPublic() {
			return &key, k.issuer
		}
	}
	return nil, k.issuer
}

// fetch asks the kube-apiserver for the issuer and its keys, and keeps them if it answers.
func (k *tokenKeys) fetch(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keysFetchTimeout)
	defer cancel()
	var discovery struct {
		Issuer string `json:"issuer"`
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	raw, err := k.rc.Get().AbsPath("/.well-known/openid-configuration").DoRaw(ctx)
	if err == nil {
		err = json.Unmarshal(raw, &discovery)
	}
	if err == nil {
		raw, err = k.rc.Get().AbsPath("/openid/v1/jwks").DoRaw(ctx)
	}
	if err == nil {
		err = json.Unmarshal(raw, &set)
	}
	if err != nil || discovery.Issuer == "" {
		// Said once (then at debug level until they are fetched): anyone can make them be
		// asked for again every keysRefetchEvery.
		k.mu.Lock()
		log := k.log
		if k.failed {
			log = log.V(1)
		}
		k.failed = true
		k.mu.Unlock()
		log.Info("the service account issuer's keys could not be fetched: a new token to the ledger spends its address's reviews (RBAC: get /.well-known/openid-configuration and /openid/v1/jwks)", "error", err)
		return
	}
	var keys jose.JSONWebKeySet
	for _, raw := range set.Keys {
		var key jose.JSONWebKey
		if json.Unmarshal(raw, &key) == nil { // a key of a type not known is skipped, not all
			keys.Keys = append(keys.Keys, key)
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.issuer, k.keys, k.failed = discovery.Issuer, keys, false
}
