package localstack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/apiserver/connectorsecrets"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/standardwebhooks"
)

const (
	// SystemNamespace holds API key hashes, webhook signing secrets and PaymentEvents.
	SystemNamespace = "videogen-system"
	// DemoAccount is the seeded account (a namespace).
	DemoAccount = "demo"
)

// Demo names the seeded objects, for the banner and the end-to-end tests.
type Demo struct {
	ShortTemplate    string
	TemplateTemplate string
	PoseTemplate     string
	// FaceURL and VideoURL are sample inputs served by the worker.
	FaceURL  string
	VideoURL string
	// StripeWebhookSecret signs test deliveries to POST /v1/webhooks/stripe.
	StripeWebhookSecret string
}

// seed creates, idempotently, everything a newcomer needs to try the API.
func (s *Stack) seed(ctx context.Context) error {
	for _, ns := range []string{SystemNamespace, DemoAccount} {
		err := s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	media, err := s.makeMedia(ctx)
	if err != nil {
		return err
	}
	s.Demo = Demo{ShortTemplate: "demo-portrait", TemplateTemplate: "demo-countdown",
		PoseTemplate: "demo-pose", FaceURL: media.face, VideoURL: media.watermarked}
	templates := []videogenv1alpha1.Template{
		template(s.Demo.ShortTemplate, videogenv1alpha1.TemplateSpec{Capability: videogenv1alpha1.CapabilityShort,
			DisplayName: "Portrait (face swap)", Price: ptr.To[int64](30), CoverURL: media.portraitCover, MediaURL: media.portrait}),
		template(s.Demo.TemplateTemplate, videogenv1alpha1.TemplateSpec{Capability: videogenv1alpha1.CapabilityTemplate,
			DisplayName: "Countdown (2 to 10 seconds)", CoverURL: media.countdownCover, MediaURL: media.countdown,
			DurationAdjustable: true, MinDuration: ptr.To[int32](2), MaxDuration: ptr.To[int32](10),
			DurationPrices: map[string]int64{"2": 10, "5": 20, "10": 35}}),
		template(s.Demo.PoseTemplate, videogenv1alpha1.TemplateSpec{Capability: videogenv1alpha1.CapabilityPose,
			DisplayName: "Studio pose", Price: ptr.To[int64](15), CoverURL: media.poseImage, MediaURL: media.poseImage}),
	}
	for i := range templates {
		if err := s.apply(ctx, &templates[i]); err != nil {
			return err
		}
	}
	acct := &videogenv1alpha1.PointAccount{ObjectMeta: metav1.ObjectMeta{Namespace: DemoAccount, Name: videogenv1alpha1.PointAccountName},
		Spec: videogenv1alpha1.PointAccountSpec{Description: "Demo account of the local stack"}}
	if err := s.Client.Create(ctx, acct); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// The top-up is applied by the manager once it runs; its fixed name makes it once only.
	welcome := &videogenv1alpha1.PointTopUp{ObjectMeta: metav1.ObjectMeta{Namespace: DemoAccount, Name: "welcome"},
		Spec: videogenv1alpha1.PointTopUpSpec{Amount: s.cfg.DemoPoints, Reference: "LOCAL-WELCOME", Note: "seeded by make run"}}
	if err := s.Client.Create(ctx, welcome); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := s.stripeWebhookSecret(ctx); err != nil {
		return err
	}
	return s.demoKey(ctx)
}

// stripeWebhookSecret gives the stripe connector a signing secret, so that a webhook signed as
// the README shows is verified on a fresh stack (every connector refuses all deliveries until
// it has one). The plaintext stays in the data directory, as the demo key does.
func (s *Stack) stripeWebhookSecret(ctx context.Context) error {
	path := s.path("stripe-webhook-secret")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: SystemNamespace, Name: "stripe-webhook-local",
		Labels: map[string]string{connectorsecrets.LabelConnector: "stripe"}}}
	switch err := s.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret); {
	case err == nil:
		s.Demo.StripeWebhookSecret = strings.TrimSpace(string(secret.Data[connectorsecrets.KeySecret]))
	case apierrors.IsNotFound(err):
		s.Demo.StripeWebhookSecret = standardwebhooks.NewSecret() // whsec_…, as Stripe's
		secret.StringData = map[string]string{connectorsecrets.KeySecret: s.Demo.StripeWebhookSecret}
		if err := s.Client.Create(ctx, secret); err != nil {
			return err
		}
	default:
		return err
	}
	return os.WriteFile(path, []byte(s.Demo.StripeWebhookSecret+"\n"), 0o600)
}

// apply creates obj or updates its spec to what the seed says.
func (s *Stack) apply(ctx context.Context, t *videogenv1alpha1.Template) error {
	existing := &videogenv1alpha1.Template{}
	err := s.Client.Get(ctx, client.ObjectKeyFromObject(t), existing)
	switch {
	case apierrors.IsNotFound(err):
		return s.Client.Create(ctx, t)
	case err != nil:
		return err
	}
	existing.Spec = t.Spec
	return s.Client.Update(ctx, existing)
}

func template(name string, spec videogenv1alpha1.TemplateSpec) videogenv1alpha1.Template {
	return videogenv1alpha1.Template{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

// demoKey reuses the key saved by an earlier run if it is still valid, or issues a new one.
// Only this local file holds the plaintext key; the cluster keeps its hash.
func (s *Stack) demoKey(ctx context.Context) error {
	path := s.path("demo-api-key")
	if raw, err := os.ReadFile(path); err == nil {
		key := strings.TrimSpace(string(raw))
		auth := &apikeys.Authenticator{Reader: s.Client, Namespace: SystemNamespace}
		if _, err := auth.Authenticate(ctx, key); err == nil {
			s.DemoKey = key
			return nil
		} else if !errors.Is(err, apikeys.ErrInvalidKey) {
			return err
		}
	}
	key, _, err := apikeys.Issue(ctx, s.Client, SystemNamespace, DemoAccount, "demo key of the local stack")
	if err != nil {
		return err
	}
	s.DemoKey = key
	return os.WriteFile(path, []byte(key+"\n"), 0o600)
}

// Banner is what `make run` prints once the stack is up.
func (s *Stack) Banner() string {
	h := fmt.Sprintf("-H 'Authorization: Bearer %s' -H 'Content-Type: application/json'", s.DemoKey)
	replicas := ""
	if len(s.APIURLs) > 1 {
		replicas = "\n               more replicas: " + strings.Join(s.APIURLs[1:], ", ") + " (one ledger: any answers alike)"
	}
	return fmt.Sprintf(`
videogen is running.

  REST API     %[1]s   (OpenAPI: %[1]s/v1/openapi.json)%[14]s
  API key      %[2]s   (account %[3]q, saved in %[4]s)
  kubectl      export KUBECONFIG=%[5]s
  logs         %[6]s
  payments     POST %[1]s/v1/webhooks/{connector}; EventService.Handle (gRPC,
               Connect) on the same port, service token in %[12]s;
               stripe's signing secret in %[13]s (README: "Payment webhooks")

Try it:

  curl -s %[7]s '%[1]s/v1/templates?capability=video.short'
  curl -s %[7]s -H 'Idempotency-Key: first-video' \
       -d '{"template_id":"%[8]s","face":"%[9]s"}' %[1]s/v1/videos/short
                                          # Eileen Collins' face into Grace Hopper's portrait
  curl -s %[7]s %[1]s/v1/tasks            # poll; result.video_url opens the video
  curl -s %[7]s %[1]s/v1/balance
  curl -s %[7]s -d '{"video":"%[10]s"}' %[1]s/v1/videos/eraser
  curl -s %[7]s -d '{"template_id":"%[11]s","duration":5}' %[1]s/v1/videos/template
  kubectl get videotasks,pointaccounts -n %[3]s

Ctrl-C stops everything; the next make run keeps the data and the key.
`, s.APIURL, s.DemoKey, DemoAccount, s.path("demo-api-key"), s.Kubeconfig, s.path("logs"), h,
		s.Demo.ShortTemplate, s.Demo.FaceURL, s.Demo.VideoURL, s.Demo.TemplateTemplate, s.path("event-service-tokens"),
		s.path("stripe-webhook-secret"), replicas)
}
