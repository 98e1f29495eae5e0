package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/catalog"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/pricing"
)

// accept records a task's hold in its status (charge Frozen, cost) and dispatches its first
// stage in the same write. A task the ledger created already holds its price (the create was
// the freeze); one made with kubectl is priced here and admitted by the ledger first. A task
// that cannot be priced or paid for fails without moving any points.
func (r *VideoTaskReconciler) accept(ctx context.Context, task *videogenv1alpha1.VideoTask, view ledger.View) (ctrl.Result, error) {
	before := task.Status.DeepCopy()
	// Fresh: the media recorded here is what every stage renders on.
	tmpl, err := r.resolveTemplate(ctx, task, true)
	if err != nil {
		code, ok := invalidTemplateCode(err)
		if !ok {
			return ctrl.Result{}, err
		}
		if view.Standing == ledger.Held {
			// Admitted at the REST API, and its template went away since: the caller was told
			// it is queued, so it ends as a task whose template goes while it runs does
			// (reconcileActive), refunded, not as a request naming no template (and a stage
			// submitted by a reconcile whose status write was lost is stopped).
			r.cancelUnrecordedStages(ctx, task)
			task.Status.AccountUID = view.Account
			return r.finish(ctx, task, before, view, templateGone(err))
		}
		return ctrl.Result{}, r.reject(ctx, task, videogenv1alpha1.ReasonInvalidRequest, code, err.Error())
	}

	price := view.Price
	admitted := false
	if view.Standing == ledger.Unadmitted {
		if price, err = pricing.Quote(tmpl.Terms, task.Spec.Duration, r.Config.DefaultPrice); err != nil {
			return ctrl.Result{}, r.reject(ctx, task, videogenv1alpha1.ReasonInvalidRequest, "invalid_duration", err.Error())
		}
		err = r.Ledger.Admit(task, price, view.Account)
		var short *ledger.InsufficientBalanceError
		switch {
		case errors.As(err, &short):
			return ctrl.Result{}, r.reject(ctx, task, videogenv1alpha1.ReasonInsufficientBalance, "insufficient_balance",
				fmt.Sprintf("the account has %d points available and this task costs %d; ask an administrator for a top-up", short.Available, short.Required))
		case errors.Is(err, ledger.ErrAccountSuspended):
			return ctrl.Result{}, r.reject(ctx, task, videogenv1alpha1.ReasonAccountSuspended, "account_suspended", "the account is suspended and takes no new tasks")
		case errors.Is(err, ledger.ErrAccountClosing):
			return ctrl.Result{}, r.reject(ctx, task, videogenv1alpha1.ReasonAccountClosing, "account_closing", "the account is being deleted and takes no new tasks")
		case errors.Is(err, ledger.ErrAccountNotFound):
			return r.noAccount(ctx, task)
		case errors.Is(err, ledger.ErrNotReady):
			return ctrl.Result{RequeueAfter: r.Config.PollInterval}, nil
		case err != nil:
			return ctrl.Result{}, err
		}
		admitted = true
	}

	view.Standing, view.Price = ledger.Held, price
	task.Status.Phase = videogenv1alpha1.TaskQueued
	task.Status.Cost = &price
	task.Status.AccountUID = view.Account // the account the books that admitted it, or froze it at its create, keep
	task.Status.TemplateMediaURL = tmpl.MediaURL
	task.Status.TemplateMediaOfficial = tmpl.Official
	task.Status.Charge = videogenv1alpha1.ChargeFrozen
	r.setCondition(task, videogenv1alpha1.ConditionAccepted, metav1.ConditionTrue, videogenv1alpha1.ReasonFrozen, fmt.Sprintf("Froze %d points", price))
	res, err := r.advance(ctx, task, tmpl, before, view, nil)
	if apierrors.IsConflict(err) {
		if admitted {
			// The write that records the hold did not land (and cannot any more).
			r.Ledger.Unadmit(task)
		}
		r.stopIfEnded(ctx, task)
	}
	return res, err
}

// stopIfEnded reads around the cache a task whose acceptance write conflicted: if it has ended
// (a write that ended it landed, its answer an error, and this reconcile's copy was from
// before it), the stage this acceptance submitted runs for nobody, and nothing else stops it
// (reconcileFinished does not), so it is cancelled here, by its key. A task still open submits
// the stage again, under the same key, on its next reconcile.
func (r *VideoTaskReconciler) stopIfEnded(ctx context.Context, task *videogenv1alpha1.VideoTask) {
	if r.APIReader == nil {
		return
	}
	fresh := &videogenv1alpha1.VideoTask{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(task), fresh); err != nil || fresh.UID != task.UID {
		return
	}
	if fresh.Status.Phase.Terminal() || fresh.Status.Closed {
		r.cancelUnrecordedStages(ctx, fresh)
	}
}

// reject ends a task that never held points (nothing is charged or refunded). One the ledger
// found overdrawn may have a stage running at a backend and the finalizer: the stage is
// cancelled and the task let go as any ending task is (writeTerminal).
func (r *VideoTaskReconciler) reject(ctx context.Context, task *videogenv1alpha1.VideoTask, reason, code, message string) error {
	r.cancelRunningStages(ctx, task)
	r.cancelUnrecordedStages(ctx, task)
	now := metav1.NewTime(r.Clock.Now())
	task.Status.Phase = videogenv1alpha1.TaskFailed
	task.Status.CompletedAt = &now
	task.Status.Charge = ""
	task.Status.Error = &videogenv1alpha1.TaskError{Code: code, Message: message}
	r.setCondition(task, videogenv1alpha1.ConditionAccepted, metav1.ConditionFalse, reason, message)
	r.setCondition(task, videogenv1alpha1.ConditionFailed, metav1.ConditionTrue, reason, message)
	if err := r.writeTerminal(ctx, task); err != nil {
		return err
	}
	r.Recorder.Eventf(task, nil, corev1.EventTypeWarning, reason, "Reject", "%s", message)
	tasksFinished.WithLabelValues(string(task.Spec.Capability), outcomeOf(task.Status.Phase), reason).Inc()
	taskDuration.WithLabelValues(string(task.Spec.Capability), outcomeOf(task.Status.Phase)).
		Observe(task.Status.CompletedAt.Sub(task.CreationTimestamp.Time).Seconds())
	return nil
}

// cancelUnrecordedStages asks the backend to stop, by key, the stages task's status does not
// show started: an earlier reconcile may have submitted one and lost the status write that
// recorded it (a conflict, which took the hold back, or a crash), and a task refused now never
// runs it, nor pays for it. Backends find such work by its key (and stopping work that was
// never submitted is no error), as advance's "no handle yet" branch does for a cancel.
func (r *VideoTaskReconciler) cancelUnrecordedStages(ctx context.Context, task *videogenv1alpha1.VideoTask) {
	_, b, ok := r.Backends.Route(task.Spec.Capability)
	if !ok {
		return
	}
	for _, name := range videogenv1alpha1.Stages {
		shown := false
		for _, st := range task.Status.Stages {
			shown = shown || (st.Name == name && st.State != "" && st.State != videogenv1alpha1.StagePending)
		}
		if !shown {
			r.cancelWork(ctx, b, r.work(task, catalog.Template{}, name), "")
		}
	}
}

// resolveTemplate finds the task's template in the cache, and, before calling it missing, around
// the cache: a template created just before the task (one kubectl apply of both) may not be
// cached yet, and a missing template fails the task for good. With fresh, the account's own
// templates (ShortTemplates) are always read around the cache: a cache that lags behind the
// namespace's deletion and re-creation may still hold the old tenant's template under the
// same id (an id derives from the namespace's name and an Idempotency-Key), and the task
// would render the old tenant's media.
func (r *VideoTaskReconciler) resolveTemplate(ctx context.Context, task *videogenv1alpha1.VideoTask, fresh bool) (catalog.Template, error) {
	resolve := catalog.ResolveWithObjectNames
	if _, rest := task.Annotations[videogenv1alpha1.AnnotationAdmission]; rest {
		// Made by the ledger for the REST API, which quoted it without object names: a
		// ShortTemplate named like a vanished official Template must not stand in for it.
		resolve = catalog.Resolve
	}
	tmpl, err := resolve(ctx, r.Client, task.Namespace, task.Spec.Capability, task.Spec.TemplateRef)
	missing := errors.Is(err, catalog.ErrTemplateNotFound)
	ownTemplate := err == nil && task.Spec.TemplateRef != "" && !tmpl.Official
	if r.APIReader != nil && (missing || fresh && ownTemplate) {
		tmpl, err = resolve(ctx, r.APIReader, task.Namespace, task.Spec.Capability, task.Spec.TemplateRef)
	}
	return tmpl, err
}

// templateMediaOfficial reports whether templateMedia is an official Template's: as recorded at
// acceptance, or, for a task accepted before that was recorded, when it is the media of the
// official template its ref names now (a ref that named the account's ShortTemplate then and an
// official Template now does not make that ShortTemplate's target_url the service's).
func templateMediaOfficial(task *videogenv1alpha1.VideoTask, tmpl catalog.Template) bool {
	return task.Status.TemplateMediaOfficial ||
		tmpl.Official && tmpl.MediaURL != "" && templateMedia(task, tmpl) == tmpl.MediaURL
}

// templateMedia is the media a task's stages run on: the template's as recorded when the task
// was accepted, or, for a task accepted before that was recorded, the template's as resolved now.
func templateMedia(task *videogenv1alpha1.VideoTask, tmpl catalog.Template) string {
	if task.Status.TemplateMediaURL != "" {
		return task.Status.TemplateMediaURL
	}
	return tmpl.MediaURL
}

func invalidTemplateCode(err error) (string, bool) {
	var wrong *catalog.WrongCapabilityError
	switch {
	case errors.Is(err, catalog.ErrTemplateNotFound):
		return "template_not_found", true
	case errors.As(err, &wrong):
		return "template_capability_mismatch", true
	}
	return "", false
}

func (r *VideoTaskReconciler) setCondition(task *videogenv1alpha1.VideoTask, typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&task.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: task.Generation,
	})
	task.Status.ObservedGeneration = task.Generation
}

// noAccount refuses a task whose namespace has no PointAccount, after asking the kube-apiserver:
// the ledger learns of an account from its informer, so one created a moment before the task
// (kubectl apply of both, a GitOps sync) may not be in its books yet. The task then waits.
func (r *VideoTaskReconciler) noAccount(ctx context.Context, task *videogenv1alpha1.VideoTask) (ctrl.Result, error) {
	key := client.ObjectKey{Namespace: task.Namespace, Name: videogenv1alpha1.PointAccountName}
	switch err := r.APIReader.Get(ctx, key, &videogenv1alpha1.PointAccount{}); {
	case err == nil:
		return ctrl.Result{RequeueAfter: time.Second}, nil
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.reject(ctx, task, videogenv1alpha1.ReasonInvalidRequest, "account_not_found",
		fmt.Sprintf("namespace %s has no PointAccount %q to pay for the task: create the account and a PointTopUp, then create the task again",
			task.Namespace, videogenv1alpha1.PointAccountName))
}
