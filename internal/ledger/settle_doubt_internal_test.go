package ledger

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
)

// Checked, holds (a pin for the suspicion that a create settled as failed lands later): settleDoubt reads a task left in doubt
// once, about a second after its create, and, finding nothing, ends the hold; etcd may commit
// the create later still (the kube-apiserver's timeout is not etcd's). No read can prove a
// pending write will not commit, so the late task is what rule 2 says: an admission the books
// did not count, counted when seen if the balance covers it, else Overdrawn (the controller
// ends it InsufficientBalance before it runs). Never a second hold, never a charge beyond the
// balance; spent stays the sum of the prices of tasks that can succeed.
//
// Interleaving: 1. a create of "a" at 60 (balance 100) is answered 504, nothing stored yet:
// in doubt (503 to the replica), the hold kept; 2. settleDoubt's read a second later finds
// nothing: the hold ends; then either
//   - "retried": 3. the client retries with its Idempotency-Key (the same name, body and signed
//     admission): admitted again, its create sent; 4. the first create commits first; the
//     retry's create fails AlreadyExists: the task is counted once, Held, from the read, and
//     the client is answered as a replay (ErrTaskExists); it runs and is charged once;
//   - "spent meanwhile": 3. another create, "b" at 60, is admitted with the freed points; 4. the
//     first create commits: "a" is Overdrawn, "b" holds the 60, and only "b" can be charged.
func TestACreateThatLandsAfterItsDoubtWasSettledIsCountedOnceAndNeverOverTheBalance(t *testing.T) {
	for _, variant := range []string{"retried", "spent meanwhile"} {
		t.Run(variant, func(t *testing.T) {
			h := newHarness(t, 100)
			var late *videogenv1alpha1.VideoTask
			creates := 0
			l := h.startWith(h.ctx, "ledger-22s", func(cfg *Config) {
				cfg.Client = interceptor.NewClient(k8s, interceptor.Funcs{
					Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
						if task, ok := obj.(*videogenv1alpha1.VideoTask); ok && task.Name == "a" {
							creates++
							if creates == 1 {
								late = task.DeepCopy() // step 1: queued in etcd
								return apierrors.NewTimeoutError("request did not complete within requested timeout", 0)
							}
							must(t, k8s.Create(ctx, late.DeepCopy())) // step 4 (retried): the first commits first
						}
						return c.Create(ctx, obj, opts...)
					},
				})
			})
			h.l = l
			if _, err := l.CreateTask(h.ctx, h.task("a"), 60); !errors.Is(err, errCreateInDoubt) {
				t.Fatalf("the create answered 504: %v, want in doubt", err)
			}
			// Step 2: settleDoubt reads after its second and ends the hold.
			must(t, wait.PollUntilContextTimeout(h.ctx, 20*time.Millisecond, 10*time.Second, false, func(context.Context) (bool, error) {
				return h.figures(l).Holds == 0, nil
			}))
			a := &videogenv1alpha1.VideoTask{}
			if variant == "retried" {
				_, err := l.CreateTask(h.ctx, h.task("a"), 60) // step 3
				if !errors.Is(err, ErrTaskExists) {
					t.Fatalf("the keyed retry meeting the first create's late commit: %v, want ErrTaskExists (a replay)", err)
				}
				must(t, k8s.Get(h.ctx, client.ObjectKey{Namespace: h.ns, Name: "a"}, a))
				h.feed(l, a)
				if v, err := l.View(a); err != nil || v.Standing != Held {
					t.Fatalf("a: %+v %v, want Held", v, err)
				}
				if f := h.figures(l); f.Frozen != 60 || f.Holds != 1 {
					t.Fatalf("figures %+v, want a's 60 held once", f)
				}
				h.charge(l, a)
				h.books(h.settle(l), 100, 60, 0)
				return
			}
			b, err := l.CreateTask(h.ctx, h.task("b"), 60) // step 3
			must(t, err)
			a = late.DeepCopy()
			must(t, k8s.Create(h.ctx, a)) // step 4
			h.feed(l, a)
			if v, err := l.View(a); err != nil || v.Standing != Overdrawn {
				t.Fatalf("a, landed after its hold ended and b took the points: %+v %v, want Overdrawn", v, err)
			}
			if _, err := l.Charge(a, &videogenv1alpha1.TaskResult{URL: "https://media.example/out/a.mp4"}); !errors.Is(err, ErrSettled) {
				t.Fatalf("charging the overdrawn a: %v, want ErrSettled", err)
			}
			if f := h.figures(l); f.Frozen != 60 || f.Holds != 1 || f.Balance != 40 {
				t.Fatalf("figures %+v, want b's 60 held once", f)
			}
			h.charge(l, b)
			h.books(h.settle(l), 100, 60, 0)
		})
	}
}

// A REST create answered with an error that is
// no refusal (a 504, a 500, a 503, a cut connection) whose re-read finds the name taken by a
// task that is not this create's (another admission: a reuse of the Idempotency-Key with
// another body, or the same body priced again after a template's price changed, meeting the
// earlier request's task that the books have not seen yet) counts that task (rule 2) and ends
// its own hold, rightly: the name is taken, so this create cannot land. But it answered the
// create's raw error: the ledger's endpoint 500 internal_error, and the REST apiserver 500
// "internal error" to the client, where an AlreadyExists answer of the same create is a 409
// that the REST apiserver answers as a replay (200 with the task, or 422 for a key reused with
// another body).
//
// Interleaving (one manager): 1. an earlier create of "a" (price 60) was in doubt and its hold
// ended when settleDoubt's read found nothing (TestACreateThatLandsAfterItsDoubtWasSettled...);
// 2. etcd commits it; its event has not reached the ledger yet; 3. the client sends its
// Idempotency-Key again, with another body (here: another source video): the ledger admits
// it (no entry has the name) and sends its create; 4. the kube-apiserver, slow (the same etcd
// slowness as step 1), answers 504; 5. the re-read finds the task of step 2. Reachable: step 3
// is client input (a reused key); steps 2 and 4 are the slow etcd that a create in doubt is
// about. What the user sees: 500 internal_error (its request logged as the service's fault)
// instead of 422 idempotency_key_reused; with the same body at a changed price, 500 instead of
// a 200 replay of its task, which runs.
func TestACreateInDoubtWhoseNameAnotherTaskHasIsATaskThatExistsNot500(t *testing.T) {
	for name, answer := range map[string]error{
		"504 Timeout":    apierrors.NewTimeoutError("request did not complete within requested timeout", 0),
		"500 etcd":       apierrors.NewInternalError(errors.New("etcdserver: request timed out")),
		"cut connection": &url.Error{Op: "Post", URL: "https://10.96.0.1:443/apis", Err: io.ErrUnexpectedEOF},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, 100)
			l := h.startWith(h.ctx, "ledger-22o", func(cfg *Config) {
				cfg.Client = interceptor.NewClient(k8s, interceptor.Funcs{
					Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
						if err := c.Create(ctx, obj, opts...); !apierrors.IsAlreadyExists(err) {
							return err
						}
						return answer // step 4: the AlreadyExists never came back
					},
				})
			})
			h.l = l
			earlier := h.task("a") // step 2: the earlier request's task, signed; its event is not fed
			earlier.Spec.Inputs.SourceVideoURL = "https://media.example/earlier.mp4"
			l.cfg.Signer.Sign(earlier, 60)
			must(t, k8s.Create(h.ctx, earlier))

			_, err := l.CreateTask(h.ctx, h.task("a"), 60) // step 3, 5 inside
			rec := httptest.NewRecorder()
			writeLedgerError(rec, err)
			if !errors.Is(err, ErrTaskExists) || rec.Code != http.StatusConflict {
				t.Fatalf("a create answered %s whose name the earlier task has: %v, answered %d %s;\n"+
					"want ErrTaskExists (409 task_exists: the REST apiserver answers it as a replay)", name, err, rec.Code, strings.TrimSpace(rec.Body.String()))
			}
			if v, err := l.View(earlier); err != nil || v.Standing != Held {
				t.Fatalf("the earlier task: %+v %v, want Held (counted from the read)", v, err)
			}
			if f := h.figures(l); f.Frozen != 60 || f.Holds != 1 {
				t.Fatalf("figures %+v, want the earlier task's 60 held once", f)
			}
		})
	}
}
