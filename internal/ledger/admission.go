package ledger

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Signer signs the admission annotation of the tasks the ledger creates for the REST API, so
// that the annotation is proof of a freeze: anyone who may create a VideoTask may write an
// annotation, but only the ledger holds the key. The signature covers the namespace, the name,
// the price and the spec (which is immutable), so it cannot be moved to another task.
type Signer struct{ key []byte }

// NewSigner returns a Signer with key (at least 32 bytes; every manager replica must use the same).
func NewSigner(key []byte) (*Signer, error) {
	if len(key) < 32 {
		return nil, fmt.Errorf("ledger signing key must be at least 32 bytes, got %d", len(key))
	}
	return &Signer{key: append([]byte(nil), key...)}, nil
}

// Sign sets the task's admission annotation for price.
func (s *Signer) Sign(task *videogenv1alpha1.VideoTask, price int64) {
	if task.Annotations == nil {
		task.Annotations = map[string]string{}
	}
	task.Annotations[videogenv1alpha1.AnnotationAdmission] = strconv.FormatInt(price, 10) + ":" + s.mac(task, price)
}

// Admitted returns the price the task's admission annotation proves, if it carries a valid one.
func (s *Signer) Admitted(task *videogenv1alpha1.VideoTask) (int64, bool) {
	price, sig, ok := strings.Cut(task.Annotations[videogenv1alpha1.AnnotationAdmission], ":")
	if !ok {
		return 0, false
	}
	p, err := strconv.ParseInt(price, 10, 64)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != price {
		return 0, false
	}
	want := s.mac(task, p)
	return p, hmac.Equal([]byte(sig), []byte(want))
}

func (s *Signer) mac(task *videogenv1alpha1.VideoTask, price int64) string {
	spec, _ := json.Marshal(task.Spec) // a struct: fields in a fixed order, maps sorted
	m := hmac.New(sha256.New, s.key)
	fmt.Fprintf(m, "videogen.dev/admission/v1\n%s\n%s\n%d\n", task.Namespace, task.Name, price)
	m.Write(spec)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
