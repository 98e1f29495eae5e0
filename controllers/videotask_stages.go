package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/catalog"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/jobbackend"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/outbound"
)

// stageWeight is the share of overall progress the analyze stage stands for.
const analyzeWeight = 30

// reconcileActive drives a Queued or Running task that holds its price.
func (r *VideoTaskReconciler) reconcileActive(ctx context.Context, task *videogenv1alpha1.VideoTask, view ledger.View) (ctrl.Result, error) {
	before := task.Status.DeepCopy()
	// From the cache: the media was recorded at acceptance; this only asks whether the
	// template is still there (polled often, so not read around the cache each time).
	tmpl, err := r.resolveTemplate(ctx, task, false)
	if err != nil {
		if _, ok := invalidTemplateCode(err); ok {
			// The template went away mid-task: nothing more can be rendered from it, so the
			// task stops as a cancelled one does: what runs at the backend is stopped, not left
			// to run to its deadline, after one last look, so that a render that finished
			// before the template went wins.
			end := templateGone(err)
			return r.advance(ctx, task, catalog.Template{}, before, view, &end)
		}
		return ctrl.Result{}, err
	}
	return r.advance(ctx, task, tmpl, before, view, nil)
}

// templateGone is how a task that holds its price ends when its template went away (err says
// how: not found, or no longer of the task's capability).
func templateGone(err error) outcome {
	return outcome{reason: videogenv1alpha1.ReasonTemplateUnavailable, code: "template_unavailable",
		message: fmt.Sprintf("the task's template went away after the task was accepted (%v): nothing more can be rendered from it", err)}
}

// outcome is how a task ends.
type outcome struct {
	success bool
	reason  string
	code    string
	message string
	result  *videogenv1alpha1.TaskResult
}

// advance submits and observes stages until one is still running, then writes the status once
// (before is the status as read). The backend is asked first: a render that finished wins over
// a timeout or a cancel request that raced it. gone, if not nil, is how the task ends because
// its template went away: it stops as a cancelled one does.
func (r *VideoTaskReconciler) advance(ctx context.Context, task *videogenv1alpha1.VideoTask, tmpl catalog.Template,
	before *videogenv1alpha1.VideoTaskStatus, view ledger.View, gone *outcome) (ctrl.Result, error) {
	for _, s := range videogenv1alpha1.Stages {
		stageStatus(task, s) // create every entry first so pointers into the slice stay valid
	}
	now := r.Clock.Now()
	deadline := r.deadline(task)

	name, backend, ok := r.Backends.Route(task.Spec.Capability)
	r.followRenames(task, name, backend)
	shown := name // what the status calls backend: one found by its url (finishedAt) has a name of its own
	if !ok {
		// No backend serves the capability any more (it was withdrawn across a restart), but a
		// stage may run at the backend it was submitted to, still configured (see backendOf)
		// for other capabilities: a render that succeeded there is the task's result, as after
		// a reroute (finishedAt), asked before the task waits, times out or stops. A stage that
		// failed there, or that backend lost, has no backend to run it again: the task fails now
		// (stranded) rather than wait for its timeout.
		for _, s := range videogenv1alpha1.Stages {
			st := stageStatus(task, s)
			if st.State != videogenv1alpha1.StageRunning || st.Handle == "" {
				continue // stages run one after another: at most one runs
			}
			w := r.work(task, tmpl, s)
			oldName, old, obs, err, found := r.lookWhereItRan(ctx, task, w, st, now, deadline, gone)
			switch {
			case found && err == nil && obs.State == generation.Succeeded && st.Name == videogenv1alpha1.StageRender:
				name, backend, ok = st.Backend, old, true // observed there once more, below, and taken
				shown = oldName
				now = r.Clock.Now()
			case found && ((err == nil && obs.State == generation.Failed) || generation.IsPermanent(err)):
				return r.stranded(ctx, task, before, view, oldName, old, w, st, obs, err)
			}
		}
	}
	if !ok {
		if end, stop := r.abandoned(task, now, deadline, gone); stop {
			r.cancelRunningStages(ctx, task) // with no backend to ask, they are only marked
			return r.finish(ctx, task, before, view, end)
		}
		msg := fmt.Sprintf("no generation backend serves %s; the task waits until its timeout", task.Spec.Capability)
		r.setCondition(task, videogenv1alpha1.ConditionDispatched, metav1.ConditionFalse, videogenv1alpha1.ReasonNoBackend, msg)
		if err := r.writeIfChanged(ctx, task, before); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: until(now, deadline, 30*time.Second)}, nil
	}

	// The acceptance is written with the first stage's dispatch, in one status write, unless
	// the backend takes longer than acceptWait to answer: then it is written alone.
	calls := ctx
	if before.Charge != videogenv1alpha1.ChargeFrozen {
		var cancel context.CancelFunc
		calls, cancel = context.WithTimeout(ctx, acceptWait)
		defer cancel()
	}
	// acceptDue says whether a failed call ran out of acceptWait (not of its own bounds, nor
	// cut short by a cancel request): the status is then written as it stands.
	acceptDue := func() bool { return calls.Err() != nil && ctx.Err() == nil }

stages:
	for i := 0; i < len(videogenv1alpha1.Stages); i++ {
		stageName := videogenv1alpha1.Stages[i]
		st := stageStatus(task, stageName)
		if st.State == videogenv1alpha1.StageSucceeded {
			continue
		}
		w := r.work(task, tmpl, stageName)
		// where, under whereName, is where the stage is looked at: the backend that serves
		// its capability, or the one it finished at before the routes changed.
		where, whereName := backend, shown
		if st.State == videogenv1alpha1.StageRunning && st.Handle != "" && st.Backend != "" && !sameServer(*st, name, backend) {
			if oldName, old, ok := r.finishedAt(calls, task, w, st, now, deadline, gone); ok {
				where, whereName = old, oldName
			} else {
				r.rerouteStage(ctx, task, w, st, name, backend)
				w = r.work(task, tmpl, stageName) // under the key its reroutes give it now
			}
		}
		if st.Handle == "" && stageName == videogenv1alpha1.StageRender && r.analyzedElsewhere(task, st, name, backend) {
			i = -1 // analyze again at name, in this same reconcile and status write
			continue
		}
		if st.Handle == "" {
			if end, stop := r.abandoned(task, now, deadline, gone); stop {
				// An earlier Submit whose status write was lost (a conflict with the cancel
				// request itself, say) may have started work under w.Key: stop it too. A stage
				// its backend lost, not submitted again yet, still says Running: it ends
				// Canceled, as any stage that runs when its task stops.
				if st.State == videogenv1alpha1.StageRunning {
					r.cancelStage(ctx, task, backend, w, st)
				} else {
					r.cancelWork(ctx, backend, w, "")
				}
				return r.finish(ctx, task, before, view, end)
			}
			callCtx, done := r.callContext(calls, task, now, deadline, gone)
			handle, err := backend.Submit(callCtx, w)
			done()
			now = r.Clock.Now() // a slow backend's call took its time: judge by the time after it
			if err != nil && acceptDue() {
				// The next reconcile submits again: Submit is idempotent by w.Key.
				st.Message = fmt.Sprintf("waiting for %s to take the stage", name)
				break stages
			}
			if err != nil {
				return r.backendError(ctx, task, before, view, name, backend, w, st, err, deadline, gone)
			}
			at := metav1.NewTime(now)
			st.Handle, st.Backend, st.State, st.StartedAt, st.Message = handle, name, videogenv1alpha1.StageRunning, &at, runningMessage(st, "")
			st.Server = generation.ServerOf(backend)
			recordServer(task, name, st.Server) // an analyze whose outputs it was handed
			task.Status.Phase = videogenv1alpha1.TaskRunning
			if task.Status.StartedAt == nil {
				task.Status.StartedAt = &at
			}
			accepted := fmt.Sprintf("%s accepted the %s stage", name, stageName)
			if st.Resubmissions > 0 {
				accepted = fmt.Sprintf("%s accepted the %s stage again after losing it (%d of %d)", name, stageName, st.Resubmissions, maxResubmissions)
			}
			r.setCondition(task, videogenv1alpha1.ConditionDispatched, metav1.ConditionTrue, videogenv1alpha1.ReasonBackendAccepted, accepted)
			// Look at the stage right away: a fast backend may be done already, and then the
			// next stage (or the end) is written in this same status update.
		}

		_, stopping := r.abandoned(task, now, deadline, gone)
		callCtx, done := r.callContext(calls, task, now, deadline, gone)
		obs, err := where.Observe(callCtx, w, st.Handle)
		cut := errors.Is(callCtx.Err(), context.DeadlineExceeded)
		done()
		now = r.Clock.Now()
		if err != nil && cut && !stopping && !acceptDue() {
			if _, stop := r.abandoned(task, now, deadline, gone); stop {
				// The look began before the deadline and was cut at it: the stage gets the last
				// look any stage of a task past its deadline gets, so that a render that
				// finished wins over the timeout whenever its look began.
				callCtx, done = r.callContext(calls, task, now, deadline, gone)
				obs, err = where.Observe(callCtx, w, st.Handle)
				done()
				now = r.Clock.Now()
			}
		}
		if err != nil && acceptDue() {
			break stages // the stage runs: its first look is the next reconcile's
		}
		if err != nil && r.resubmitLost(ctx, task, st, err, now, deadline, gone) {
			i-- // submit the stage again, in this same reconcile and status write
			continue
		}
		if err != nil {
			return r.backendError(ctx, task, before, view, whereName, where, w, st, err, deadline, gone)
		}
		obs.Message = backendText(obs.Message)
		if st.Server == "" && st.Backend == name && whereName == name {
			// Recorded before stages recorded their server: the one that answered for its handle,
			// configured under its name, is taken for the one that issued it (sameServer), and
			// recorded as such, so that a url changed in a later rollout is seen (rerouted).
			recordServer(task, name, generation.ServerOf(where))
		}
		if backendUnavailable(task) {
			// It answers again: the outage is over (and a next one is reported anew).
			r.setCondition(task, videogenv1alpha1.ConditionDispatched, metav1.ConditionTrue, videogenv1alpha1.ReasonBackendAccepted,
				fmt.Sprintf("%s answers again for the %s stage", whereName, stageName))
		}
		switch obs.State {
		case generation.Succeeded:
			at := metav1.NewTime(now)
			if stageName == videogenv1alpha1.StageRender && (obs.Result == nil || obs.Result.URL == "") {
				// Not a success: the stage says how it failed, as the task does.
				why := whereName + " reported success without a result"
				st.State, st.CompletedAt, st.Message = videogenv1alpha1.StageFailed, &at, why
				return r.finish(ctx, task, before, view, outcome{reason: videogenv1alpha1.ReasonStageFailed, code: "render_failed", message: why})
			}
			if why := unstorable(obs); why != "" {
				st.State, st.CompletedAt, st.Message = videogenv1alpha1.StageFailed, &at, fmt.Sprintf("%s reported %s", whereName, why)
				return r.finish(ctx, task, before, view, outcome{reason: videogenv1alpha1.ReasonStageFailed, code: string(stageName) + "_failed",
					message: fmt.Sprintf("the %s stage failed: %s reported %s", stageName, whereName, why)})
			}
			st.State, st.Progress, st.CompletedAt, st.Outputs, st.Message = videogenv1alpha1.StageSucceeded, 100, &at, obs.Outputs, obs.Message
			setProgress(task)
			if stageName == videogenv1alpha1.StageRender {
				return r.finish(ctx, task, before, view, outcome{success: true, reason: videogenv1alpha1.ReasonSucceeded, message: "Generation finished", result: obs.Result})
			}
			continue // hand the outputs to the next stage right away
		case generation.Failed:
			at := metav1.NewTime(now)
			st.State, st.CompletedAt, st.Message = videogenv1alpha1.StageFailed, &at, obs.Message
			return r.finish(ctx, task, before, view, outcome{reason: videogenv1alpha1.ReasonStageFailed, code: string(stageName) + "_failed",
				message: fmt.Sprintf("the %s stage failed: %s", stageName, obs.Message)})
		default:
			st.Progress, st.Message = clampProgress(obs.Progress), runningMessage(st, obs.Message)
			setProgress(task)
			if end, stop := r.abandoned(task, now, deadline, gone); stop {
				r.cancelStage(ctx, task, where, w, st)
				return r.finish(ctx, task, before, view, end)
			}
		}
		break
	}
	if err := r.writeIfChanged(ctx, task, before); err != nil {
		if apierrors.IsNotFound(err) {
			// Deleted before a stage of it was recorded (so without the finalizer): nothing
			// else will stop the work this reconcile started, and only it holds its handle.
			if cerr := r.cancelUnended(ctx, task, name, backend); cerr != nil {
				logf.FromContext(ctx).Error(cerr, "cancelling the work of a task deleted while it was submitted")
			}
		}
		return ctrl.Result{}, err
	}
	if err := r.guardWork(ctx, task, backend, tmpl); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: until(now, deadline, r.Config.PollInterval)}, nil
}

// followRenames records each http stage of task whose name no longer talks to its server
// (namedBackend: the backend was renamed, its url kept) under the name that server is
// configured under now: name, the capability's backend b (nil: none), if b talks to it, else
// the one backendOf finds by its url. The status then names a backend of the config (kubectl,
// videogenctl, the REST API), messages name it, and a stage of a backend only renamed is b's
// own (sameServer): neither stopped and run again nor analyzed again. The old name, if still
// configured elsewhere, talks to another server: it could stop nothing of the stage's. A Job
// stage, or one without a server, is matched by name only (see backendOf) and keeps its name.
func (r *VideoTaskReconciler) followRenames(task *videogenv1alpha1.VideoTask, name string, b generation.Backend) {
	if _, ok := r.Backends.(generation.Routes); !ok {
		return // namedBackend cannot tell whether a stage's own name still talks to its server
	}
	for i := range task.Status.Stages {
		st := &task.Status.Stages[i]
		if st.Backend == "" || st.Server == "" || st.Server == jobbackend.ServerKind {
			continue
		}
		if _, ok := r.namedBackend(*st); ok {
			continue
		}
		if b != nil && generation.ServerOf(b) == st.Server {
			st.Backend = name
		} else if now, _, ok := r.backendOf(*st); ok {
			st.Backend = now
		}
	}
}

// recordServer records server, the one configured under name now, on every stage of task
// recorded under name without a server (a status written before stages recorded theirs),
// which sameServer took for it: a running stage answered by it, or an analyze succeeded there
// whose outputs a render submitted to it was handed. A succeeded analyze is never looked at
// again: without this it would be taken for whatever server is configured under its name
// after a url change, and its outputs handed to that server's render (see analyzedElsewhere).
func recordServer(task *videogenv1alpha1.VideoTask, name, server string) {
	for i := range task.Status.Stages {
		if st := &task.Status.Stages[i]; st.Backend == name && st.Server == "" {
			st.Server = server
		}
	}
}

// maxResubmissions bounds how often a stage is submitted again because its backend lost it.
// A rollout of the reference worker loses every stage it ran once; a stage lost more often
// than this has a backend that keeps losing it, and its task fails as before.
const maxResubmissions = 2

// resubmitLost readies st to be submitted again (its handle cleared) when err, the answer to a
// look at it, says its backend lost it (generation.ErrStageLost: a worker restarted and forgot
// its stages), it was submitted again fewer than maxResubmissions times, and the task need not
// stop. It reports whether it did. Submit is idempotent by the stage's work key, so submitting
// again cannot run the stage twice at a backend that still has it; the stage's inputs (the
// analyze outputs, for render) are read from the status as at its first submission. The
// points do not move: the task keeps its hold until it ends, as any task does.
func (r *VideoTaskReconciler) resubmitLost(ctx context.Context, task *videogenv1alpha1.VideoTask, st *videogenv1alpha1.StageStatus,
	err error, now, deadline time.Time, gone *outcome) bool {
	if !generation.IsLost(err) || st.Handle == "" || st.Resubmissions >= maxResubmissions {
		return false
	}
	if _, stop := r.abandoned(task, now, deadline, gone); stop {
		return false // it ends as before: there is no time left for the stage to run again
	}
	st.Resubmissions++
	logf.FromContext(ctx).Info("backend lost the stage; submitting it again", "stage", st.Name, "handle", st.Handle,
		"resubmission", st.Resubmissions, "of", maxResubmissions, "error", err.Error())
	st.Handle, st.Message = "", fmt.Sprintf("%s; submitted it again, %d of %d", lostStage(st.Name), st.Resubmissions, maxResubmissions)
	return true
}

// rerouteStage readies st, which runs at the backend (and server) its status names, to be
// submitted to name, the backend that serves its capability now (the routes changed across a
// restart, or the server configured under the name did): its handle is the old server's and
// means nothing to the new one, which would take it for a lost stage, refuse it and fail the
// task, or give another task's stage under it. Its work at the old backend, when that is still
// configured (see backendOf: a renamed one is found by its url), is stopped; it runs to its
// deadline otherwise. A backend only renamed to name never comes here: followRenames records
// the stage under name, b's server is the stage's own (sameServer). A stage stopped so counts
// one reroute more, and is submitted under a key of its own (generation.ReroutedKey): the
// backend that stopped it would answer its old key with the stopped stage, should the routes
// come back to it. A stage not stopped keeps its key: Submit is idempotent by the work key, so
// a Job backend only renamed (or a server whose URL only changed) finds the stage it runs. The
// stage was not lost: it does not count against maxResubmissions, and its count starts afresh
// (the losses were the old backend's). b, name's backend, may itself run the stage under a key
// it had before (its plain key, say): b was configured for the capability once and taken out of
// the config (then nothing could stop the stage there), and is back. Submitted to b under a key
// b has never seen, the stage would run there twice: those keys are stopped at b.
func (r *VideoTaskReconciler) rerouteStage(ctx context.Context, task *videogenv1alpha1.VideoTask, w generation.Work,
	st *videogenv1alpha1.StageStatus, name string, b generation.Backend) {
	if _, old, ok := r.backendOf(*st); ok {
		r.cancelWork(ctx, old, w, st.Handle)
		st.Reroutes++ // whether the cancel was answered or not: it may have landed
	} else {
		r.deleteOrphanedJob(ctx, w, *st, b)
	}
	// One CancelTimeout for them all: a b that hangs would otherwise hold this reconcile for
	// a CancelTimeout per reroute, before its Submit. Those not sent in it run to their deadline.
	earlierCtx, cancel := context.WithTimeout(ctx, r.cancelTimeout())
	defer cancel()
	base := generation.WorkKey(task.Namespace, task.Name, string(task.UID), st.Name)
	for n := int32(0); n < st.Reroutes && earlierCtx.Err() == nil; n++ {
		earlier := w
		earlier.Key = generation.ReroutedKey(base, n)
		r.cancelWork(earlierCtx, b, earlier, "")
	}
	logf.FromContext(ctx).Info("the stage's backend no longer serves its capability; submitting it to the new one",
		"stage", st.Name, "from", st.Backend, "handle", st.Handle, "to", name)
	// The new backend has lost nothing yet: maxResubmissions bounds one that keeps losing it.
	st.Handle, st.Resubmissions = "", 0
	st.Message = fmt.Sprintf("%s no longer serves %s; submitting the stage to %s", st.Backend, task.Spec.Capability, name)
}

// deleteOrphanedJob stops st's Job, when st ran at a Job backend (server "job") that is no longer
// configured under its name to stop it (replaced by an http backend under the name, or taken out
// of the config): deleted by its labels (jobbackend.DeleteOrphaned), for at most CancelTimeout.
// Nothing else would: it would hold its node, unpaid, to its activeDeadlineSeconds. A failure
// (an older install's role without deletecollection, say) is logged, and the Job left so. b,
// the backend the stage goes to now (nil: none), when a Job backend that makes that very Job
// under w's key (one renamed, its Jobs in the same namespace), meets the Job itself: it follows
// it, and stops it when asked by key. One whose Jobs run in another namespace never meets it.
func (r *VideoTaskReconciler) deleteOrphanedJob(ctx context.Context, w generation.Work, st videogenv1alpha1.StageStatus, b generation.Backend) {
	if st.Server != jobbackend.ServerKind || st.Handle == "" || r.Client == nil {
		return
	}
	if follower, ok := b.(interface {
		Follows(generation.Work, string) bool
	}); ok && follower.Follows(w, st.Handle) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, r.cancelTimeout())
	defer cancel()
	if err := jobbackend.DeleteOrphaned(ctx, r.Client, w, st.Handle); err != nil {
		logf.FromContext(ctx).Error(err, "deleting the Job of a stage whose Job backend is no longer configured", "stage", w.Stage, "handle", st.Handle)
	}
}

// finishedAt is the backend st ran at before the routes changed (its status names it), and the
// name it is configured under now (see backendOf), when that backend is still configured and
// says st ended there (endedThere): the stage is then observed there, not run again at the
// backend that serves the capability now (see rerouteStage).
func (r *VideoTaskReconciler) finishedAt(ctx context.Context, task *videogenv1alpha1.VideoTask, w generation.Work,
	st *videogenv1alpha1.StageStatus, now, deadline time.Time, gone *outcome) (string, generation.Backend, bool) {
	name, old, obs, err, found := r.lookWhereItRan(ctx, task, w, st, now, deadline, gone)
	return name, old, found && err == nil && endedThere(st, obs)
}

// endedThere says whether obs, a look at st at the backend it ran at before the routes changed,
// ends st there. A render that succeeded there is the task's, made from its own analyze; an
// analyze that succeeded there runs again at the new backend, its outputs being the old one's
// own (see analyzedElsewhere). A stage
// that failed there is that backend's verdict on the task's input (no face found, say), which
// ends the task as a failed stage does without a reroute: only a lost stage is submitted again
// (resubmitLost), so a failed one is not run again at another backend either.
func endedThere(st *videogenv1alpha1.StageStatus, obs generation.Observation) bool {
	return obs.State == generation.Failed || (obs.State == generation.Succeeded && st.Name == videogenv1alpha1.StageRender)
}

// lookWhereItRan looks at st at the backend it ran at before the routes changed, if that is
// still configured (see backendOf; found false, and nothing asked, if not), under name. The
// look is bounded as any look at a stage is.
func (r *VideoTaskReconciler) lookWhereItRan(ctx context.Context, task *videogenv1alpha1.VideoTask, w generation.Work,
	st *videogenv1alpha1.StageStatus, now, deadline time.Time, gone *outcome) (name string, old generation.Backend, obs generation.Observation, err error, found bool) {
	name, old, found = r.backendOf(*st)
	if !found {
		return "", nil, generation.Observation{}, nil, false
	}
	callCtx, done := r.callContext(ctx, task, now, deadline, gone)
	obs, err = old.Observe(callCtx, w, st.Handle)
	done()
	return name, old, obs, err, true
}

// stranded ends task when st, its stage that ran at old (configured as name), ended there and
// no backend serves the task's capability to run it again: old said it failed (obs), or lost
// it or answered for it in a way no retry changes (err, permanent). The task fails now, its
// points refunded as any failed task's, instead of waiting, with nothing to wait for, until
// its timeout.
func (r *VideoTaskReconciler) stranded(ctx context.Context, task *videogenv1alpha1.VideoTask, before *videogenv1alpha1.VideoTaskStatus,
	view ledger.View, name string, old generation.Backend, w generation.Work, st *videogenv1alpha1.StageStatus,
	obs generation.Observation, err error) (ctrl.Result, error) {
	said, why := backendText(obs.Message), fmt.Sprintf("the %s stage failed at %s: %s", st.Name, name, backendText(obs.Message))
	if err != nil {
		said, why = backendText(err.Error()), permanentErrorMessage(st, err)
		if !generation.IsLost(err) {
			r.cancelWork(ctx, old, w, st.Handle) // as backendError: old may run it still
		}
	}
	at := metav1.NewTime(r.Clock.Now())
	st.State, st.CompletedAt, st.Message = videogenv1alpha1.StageFailed, &at, said
	return r.finish(ctx, task, before, view, outcome{reason: videogenv1alpha1.ReasonStageFailed, code: string(st.Name) + "_failed",
		message: fmt.Sprintf("%s; no generation backend serves %s now", why, task.Spec.Capability)})
}

// analyzedElsewhere readies the task's analyze to run again at name, the backend render is
// about to be submitted to (render, its stage status, has no handle), when the analyze
// succeeded at another backend (the routes changed across a restart): its outputs are that
// backend's own, in its own keys and format, which another's render may refuse ("previous
// lacks what render needs", blamed on the caller) or misread. It reports whether it did.
// Submit is idempotent by the work key, so a Job backend only renamed answers with the
// analyze it ran (an http one's stages follow its new name: followRenames). The render stage is Pending again, as it was before its analyze. Both keep
// their reroutes, and so their keys: a key a backend stopped is never submitted again.
func (r *VideoTaskReconciler) analyzedElsewhere(task *videogenv1alpha1.VideoTask, render *videogenv1alpha1.StageStatus,
	name string, b generation.Backend) bool {
	an := stageStatus(task, videogenv1alpha1.StageAnalyze)
	if an.State != videogenv1alpha1.StageSucceeded || an.Backend == "" || sameServer(*an, name, b) {
		return false
	}
	msg := fmt.Sprintf("analyzed at %s, which no longer serves %s; analyzing again at %s", an.Backend, task.Spec.Capability, name)
	*an = videogenv1alpha1.StageStatus{Name: an.Name, State: videogenv1alpha1.StagePending, Message: msg, Reroutes: an.Reroutes}
	*render = videogenv1alpha1.StageStatus{Name: render.Name, State: videogenv1alpha1.StagePending, Message: msg, Reroutes: render.Reroutes}
	setProgress(task)
	return true
}

// lostStage says that the backend lost a stage, in the caller's terms.
func lostStage(name videogenv1alpha1.StageName) string {
	return fmt.Sprintf("the backend lost the %s stage (it may have restarted)", name)
}

// runningMessage is a running stage's message for what its backend says of it (msg): a stage
// submitted again after its backend lost it says so for as long as it runs.
func runningMessage(st *videogenv1alpha1.StageStatus, msg string) string {
	if st.Resubmissions == 0 {
		return msg
	}
	note := fmt.Sprintf("submitted again after the backend lost it, %d of %d", st.Resubmissions, maxResubmissions)
	if msg == "" {
		return note
	}
	return msg + " (" + note + ")"
}

// backendError handles a failed Submit or Observe of st (work w at b, configured as bName),
// judged at the time after the call: a permanent error fails the stage, a task that must stop
// stops, with its running work cancelled, and any other error is recorded and retried. Its log
// lines name bName: a stage refused at Submit records no backend in its status, and the
// events, shown to the task's owner, name none.
func (r *VideoTaskReconciler) backendError(ctx context.Context, task *videogenv1alpha1.VideoTask, before *videogenv1alpha1.VideoTaskStatus,
	view ledger.View, bName string, b generation.Backend, w generation.Work, st *videogenv1alpha1.StageStatus, err error, deadline time.Time, gone *outcome) (ctrl.Result, error) {
	if errors.Is(err, context.Canceled) && ctx.Err() == nil {
		// A cancel request cut the call short (interruptCall): start again from the task as it
		// is now. Nothing was written, so no event may tell of this reconcile's changes (its
		// acceptance, say: the next reconcile writes that and tells it).
		task.Status = *before
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	now := r.Clock.Now()
	if generation.IsPermanent(err) {
		at := metav1.NewTime(now)
		st.State, st.CompletedAt, st.Message = videogenv1alpha1.StageFailed, &at, backendText(err.Error())
		logf.FromContext(ctx).Info("backend ended the stage", "backend", bName, "stage", st.Name, "handle", st.Handle, "error", err.Error())
		if st.Handle != "" && !generation.IsLost(err) {
			// Ended by an answer no retry changes (one that breaks the protocol), not by the
			// stage's end: the backend may run it still, and nothing else would stop it.
			r.cancelWork(ctx, b, w, st.Handle)
		}
		return r.finish(ctx, task, before, view, outcome{reason: videogenv1alpha1.ReasonStageFailed, code: string(st.Name) + "_failed",
			message: permanentErrorMessage(st, err)})
	}
	if end, stop := r.abandoned(task, now, deadline, gone); stop {
		if st.Handle == "" {
			// The failed Submit may have reached the backend all the same: stop what it started.
			r.cancelWork(ctx, b, w, "")
		}
		r.cancelRunningStages(ctx, task)
		return r.finish(ctx, task, before, view, end)
	}
	first := !backendUnavailable(task)
	log := logf.FromContext(ctx)
	if !first {
		// Logged once per outage of the task, as the event is; each retry only at V(1): a
		// backend down for minutes would otherwise log every task every other poll.
		log = log.V(1)
	}
	log.Info("backend unavailable, will retry", "backend", bName, "stage", st.Name, "error", err.Error())
	name, _, _ := r.Backends.Route(task.Spec.Capability)
	backendErrors.WithLabelValues(name, string(st.Name)).Inc()
	st.Message = "backend unavailable: " + backendText(err.Error())
	if first {
		// Once per outage of the task, not per retry: on-call sees it in kubectl describe.
		r.Recorder.Eventf(task, nil, corev1.EventTypeWarning, videogenv1alpha1.ReasonBackendUnavailable, "Dispatch",
			"Backend %s is unavailable for the %s stage; retrying until the task's timeout (%v)", name, st.Name, err)
	}
	r.setCondition(task, videogenv1alpha1.ConditionDispatched, metav1.ConditionFalse, videogenv1alpha1.ReasonBackendUnavailable, st.Message)
	if werr := r.writeIfChanged(ctx, task, before); werr != nil {
		return ctrl.Result{}, werr
	}
	return ctrl.Result{RequeueAfter: until(now, deadline, 2*r.Config.PollInterval)}, nil
}

// maxBackendText bounds what of a backend's text (a stage's message, an error's) goes into the
// task's status: the protocol sets no bound and the HTTP client reads up to 1 MiB, but a
// condition's message is at most 32768 bytes, and a status the kube-apiserver refuses for it
// would be refused again at every reconcile, leaving the task Running with its points held.
const maxBackendText = 4096

// backendText is s, cut to maxBackendText.
func backendText(s string) string { return outbound.Truncate(s, maxBackendText) }

// maxOutputsBytes and maxResultBytes bound a succeeded stage's outputs and result as stored
// (their JSON, as the kube-apiserver writes it: '<' takes six bytes). The outputs go into the
// task's status, the result into it and into the charge's journal entry in the PointAccount;
// an object over etcd's 1.5 MiB is refused, and the same write would be refused for ever: the
// task Running with its points held and, for a result, every account write of its namespace.
const (
	maxOutputsBytes = 256 << 10
	maxResultBytes  = 64 << 10
)

// unstorable says why a succeeded stage's outputs or result cannot be kept ("" if they can):
// too large, or a result URL that is not an absolute http(s) URL, as the task's inputs must be.
func unstorable(obs generation.Observation) string {
	if n := jsonSize(obs.Outputs); n > maxOutputsBytes {
		return fmt.Sprintf("outputs of %d bytes (at most %d are kept)", n, maxOutputsBytes)
	}
	if obs.Result == nil {
		return ""
	}
	if n := jsonSize(obs.Result); n > maxResultBytes {
		return fmt.Sprintf("a result of %d bytes (at most %d are kept)", n, maxResultBytes)
	}
	if u := obs.Result.URL; u != "" {
		parsed, err := url.Parse(u)
		if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" || len(u) > 2048 {
			return "a result URL that is not an absolute http(s) URL of at most 2048 bytes"
		}
	}
	return ""
}

func jsonSize(v any) int {
	data, _ := json.Marshal(v)
	return len(data)
}

// backendUnavailable reports whether the task's Dispatched condition says its backend did not
// answer: an outage under way, told once with its Warning event.
func backendUnavailable(task *videogenv1alpha1.VideoTask) bool {
	c := meta.FindStatusCondition(task.Status.Conditions, videogenv1alpha1.ConditionDispatched)
	return c != nil && c.Reason == videogenv1alpha1.ReasonBackendUnavailable
}

// permanentErrorMessage is the task's message for a stage that a permanent backend error ended.
// A stage has no handle only while it is submitted: then the backend refused its input. With a
// handle, the backend no longer knows the stage (it restarted, or forgot it); its handle and the
// backend's answer mean nothing to the caller and stay in the stage's status message and the log.
// A stage lost again after it was submitted again says how often it was lost.
func permanentErrorMessage(st *videogenv1alpha1.StageStatus, err error) string {
	if st.Handle == "" {
		if refusal := generation.RefusalOf(err); refusal != "" {
			// What the backend said of the input, without the HTTP exchange it was said in.
			return fmt.Sprintf("the %s stage was refused: %s", st.Name, backendText(refusal))
		}
		return fmt.Sprintf("the %s stage was refused: %s", st.Name, backendText(err.Error()))
	}
	if refusal := generation.RefusalOf(err); refusal != "" && !generation.IsLost(err) {
		// The backend answered for the stage in a way no retry changes (its answer broke the
		// protocol): not lost, and the caller is told what went wrong.
		return fmt.Sprintf("the %s stage failed: %s", st.Name, backendText(refusal))
	}
	if generation.IsLost(err) && st.Resubmissions > 0 {
		return fmt.Sprintf("the backend lost the %s stage %d times (it may have restarted)", st.Name, st.Resubmissions+1)
	}
	return lostStage(st.Name)
}

// callContext bounds a Submit or Observe: it never runs past the task's deadline nor
// BackendCallTimeout, and the stage
// of a task that must stop already (cancelled or timed out) gets one last look of at most
// CancelTimeout, for a render that finished just in time.
func (r *VideoTaskReconciler) callContext(ctx context.Context, task *videogenv1alpha1.VideoTask, now, deadline time.Time, gone *outcome) (context.Context, context.CancelFunc) {
	bound := min(deadline.Sub(now), r.backendCallTimeout())
	if _, stop := r.abandoned(task, now, deadline, gone); stop {
		bound = r.cancelTimeout()
	}
	ctx, cancel := context.WithTimeout(ctx, bound)
	r.calls.Store(task.UID, cancel)
	return ctx, func() { r.calls.Delete(task.UID); cancel() }
}

// interruptCall cuts short the backend call a reconcile of the task is making, if any.
func (r *VideoTaskReconciler) interruptCall(uid types.UID) {
	if cancel, ok := r.calls.Load(uid); ok {
		cancel.(context.CancelFunc)()
	}
}

// abandoned says whether the task must stop now because its template went away (gone is how it
// then ends), or it timed out or was cancelled.
func (r *VideoTaskReconciler) abandoned(task *videogenv1alpha1.VideoTask, now, deadline time.Time, gone *outcome) (outcome, bool) {
	if gone != nil {
		return *gone, true
	}
	if cancelRequested(task) {
		return outcome{reason: videogenv1alpha1.ReasonCanceled, code: "canceled", message: "the task was canceled on request"}, true
	}
	if !now.Before(deadline) {
		return outcome{reason: videogenv1alpha1.ReasonTimedOut, code: "timed_out",
			message: fmt.Sprintf("the task did not finish within its timeout of %s", r.timeout(task))}, true
	}
	return outcome{}, false
}

// cancelStage stops the backend's work for a stage and marks it Canceled.
func (r *VideoTaskReconciler) cancelStage(ctx context.Context, task *videogenv1alpha1.VideoTask, b generation.Backend, w generation.Work, st *videogenv1alpha1.StageStatus) {
	r.cancelWork(ctx, b, w, st.Handle)
	at := metav1.NewTime(r.Clock.Now())
	st.State, st.CompletedAt = videogenv1alpha1.StageCanceled, &at
}

// cancelRunningStages cancels every stage of task that runs at a backend, as far as its status
// knows, and marks it canceled; it reports whether there was one. A stage whose Job backend is
// no longer configured under its name has its Job deleted by its labels (deleteOrphanedJob), as
// a reroute's or a deletion's.
func (r *VideoTaskReconciler) cancelRunningStages(ctx context.Context, task *videogenv1alpha1.VideoTask) (canceled bool) {
	var (
		name string
		b    generation.Backend
	)
	for i := range task.Status.Stages {
		st := &task.Status.Stages[i]
		if st.State != videogenv1alpha1.StageRunning {
			continue
		}
		if !canceled { // routed once, and only for a task with a stage to stop
			name, b, _ = r.Backends.Route(task.Spec.Capability)
		}
		w := r.work(task, catalog.Template{}, st.Name)
		where, handle := r.stopWhere(ctx, w, *st, name, b)
		if where != nil {
			r.cancelWork(ctx, where, w, handle)
		}
		at := metav1.NewTime(r.Clock.Now())
		st.State, st.CompletedAt = videogenv1alpha1.StageCanceled, &at
		canceled = true
	}
	return canceled
}

// stageAt is where st's work is stopped, and with which handle, when name's backend b serves
// its capability now (b nil: none does). A handle is the server's that issued it, which the
// stage records: while that server is configured (see backendOf), it is asked; another backend
// is asked by the stage's key alone (an empty handle), since the old id may name another key's
// stage there (the routes changed across a restart, see rerouteStage).
func (r *VideoTaskReconciler) stageAt(st videogenv1alpha1.StageStatus, name string, b generation.Backend) (generation.Backend, string) {
	if st.Backend == "" || st.Handle == "" || (b != nil && sameServer(st, name, b)) {
		return b, st.Handle
	}
	if _, old, ok := r.backendOf(st); ok {
		return old, st.Handle
	}
	return b, ""
}

// stopWhere is stageAt for stopping st's work: when st's own backend is not configured (stageAt
// answers b, without a handle), a Job backend's Job is deleted by its labels first.
func (r *VideoTaskReconciler) stopWhere(ctx context.Context, w generation.Work, st videogenv1alpha1.StageStatus, name string, b generation.Backend) (generation.Backend, string) {
	at, handle := r.stageAt(st, name, b)
	if at == b && handle == "" {
		r.deleteOrphanedJob(ctx, w, st, b)
	}
	return at, handle
}

// sameServer says whether st's handle was issued by b, configured under name: st records
// name, and the server b talks to (generation.ServerOf) or none (a status written before
// stages recorded their server, or a backend whose handles name their place themselves).
// A backend renamed, or st's server configured under another name, is found by backendOf
// (and recorded under that name by followRenames).
func sameServer(st videogenv1alpha1.StageStatus, name string, b generation.Backend) bool {
	return st.Backend == name && (st.Server == "" || st.Server == generation.ServerOf(b))
}

// backendOf is the backend configured now that can stop st's work by its handle: the one
// under the name st records, if it talks to the server st records (namedBackend); else, for a
// stage of an http server, one configured under another name that talks to that server (the
// backend was renamed, or its url given to another entry). An http server's ids are its own,
// whoever asks: entries of one url may send other credentials (tokenFile, or user information
// in the url, which st.Server leaves out), but the protocol never gives an id to two stages,
// and Cancel names the stage by its key (the task's UID in it) before its id, and sends the
// id only when a look at it answers no other key. The whole url must match: the same host
// with another path or port may be another server. A Job stage (server "job") is matched by
// name only: its handle names a namespace that another Job backend may not use (see
// deleteOrphanedJob). It returns the name that backend is configured under, for what the
// task's status says of it: st's own name may no longer be configured.
func (r *VideoTaskReconciler) backendOf(st videogenv1alpha1.StageStatus) (string, generation.Backend, bool) {
	if b, ok := r.namedBackend(st); ok {
		return st.Backend, b, true
	}
	routes, ok := r.Backends.(generation.Routes)
	if !ok || st.Server == "" || st.Server == jobbackend.ServerKind {
		return "", nil, false
	}
	return routes.AtServer(st.Server)
}

// namedBackend is the backend configured under the name st's status records, if the routes
// know it and it talks to the server st records (see sameServer): the one that issued st's handle.
func (r *VideoTaskReconciler) namedBackend(st videogenv1alpha1.StageStatus) (generation.Backend, bool) {
	routes, ok := r.Backends.(generation.Routes)
	if !ok {
		return nil, false
	}
	b, ok := routes.Named(st.Backend)
	if !ok || !sameServer(st, st.Backend, b) {
		return nil, false
	}
	return b, true
}

// cancelWork asks the backend to stop w's work, for at most CancelTimeout; failing to is
// logged, never fatal, because the task's points are refunded either way. An empty handle
// stands for work that may have been submitted without its handle reaching the status:
// backends find it by w.Key. It returns the error for a caller that retries (finalize).
func (r *VideoTaskReconciler) cancelWork(ctx context.Context, b generation.Backend, w generation.Work, handle string) error {
	ctx, cancel := context.WithTimeout(ctx, r.cancelTimeout())
	defer cancel()
	err := b.Cancel(ctx, w, handle)
	if err != nil {
		logf.FromContext(ctx).Error(err, "cancelling backend work", "stage", w.Stage, "handle", handle)
	}
	return err
}

// acceptWait bounds the backend calls made before a new task's acceptance is written. Written
// with the first stage's dispatch, the acceptance costs no status write of its own when the
// backend answers within it (as a live one does: Submit only enqueues); a backend slower than
// that (hung, overloaded) would otherwise leave the task without a phase or an event for up to
// BackendCallTimeout. Then the acceptance is written alone and the next reconcile submits again.
const acceptWait = 2 * time.Second

// defaultBackendCallTimeout is BackendCallTimeout when the config sets none: longer than any
// Submit or Observe of a live backend takes (they only enqueue or read a stage), shorter than
// the HTTP client's retries against a backend that accepts connections and never answers.
const defaultBackendCallTimeout = 20 * time.Second

func (r *VideoTaskReconciler) backendCallTimeout() time.Duration {
	if r.Config.BackendCallTimeout > 0 {
		return r.Config.BackendCallTimeout
	}
	return defaultBackendCallTimeout
}

// defaultCancelTimeout is CancelTimeout when the config sets none.
const defaultCancelTimeout = 5 * time.Second

func (r *VideoTaskReconciler) cancelTimeout() time.Duration {
	if r.Config.CancelTimeout > 0 {
		return r.Config.CancelTimeout
	}
	return defaultCancelTimeout
}

func (r *VideoTaskReconciler) timeout(task *videogenv1alpha1.VideoTask) time.Duration {
	if task.Spec.Timeout != nil && task.Spec.Timeout.Duration > 0 {
		return task.Spec.Timeout.Duration
	}
	return r.Config.DefaultTimeout
}

func (r *VideoTaskReconciler) deadline(task *videogenv1alpha1.VideoTask) time.Time {
	return task.CreationTimestamp.Add(r.timeout(task))
}

// stageDeadlineGrace is how long after its task's deadline a backend stops a stage on its own.
// The controller's timeout, with its last look and its cancel, comes first and decides how the
// task ends; the backend's deadline only stops work whose cancel was lost.
const stageDeadlineGrace = time.Minute

// faceImageUploaded reports whether the task's face is the service's copy of one the caller sent
// inline, which the worker may fetch from the service's network: marked so on a task the ledger
// made for the REST API, which carries the ledger's admission record, signed over its spec (the
// face URL among it). A kubectl task never carries a valid one: the policies keep both
// annotations to status-writers, and where they are off (admissionPolicies.enabled: false) or
// not yet loaded, a tenant's copy of either annotation does not verify, so the tenant's URL is
// fetched as the caller's, public addresses only.
func (r *VideoTaskReconciler) faceImageUploaded(task *videogenv1alpha1.VideoTask) bool {
	return task.Annotations[videogenv1alpha1.AnnotationFaceImageUploaded] == "true" && task.Spec.Inputs.FaceImageURL != "" &&
		r.Ledger.Admitted(task)
}

func (r *VideoTaskReconciler) work(task *videogenv1alpha1.VideoTask, tmpl catalog.Template, stage videogenv1alpha1.StageName) generation.Work {
	w := generation.Work{
		Key:                   generation.ReroutedKey(generation.WorkKey(task.Namespace, task.Name, string(task.UID), stage), reroutesOf(task, stage)),
		Namespace:             task.Namespace,
		Task:                  task.Name,
		TaskUID:               string(task.UID),
		Capability:            task.Spec.Capability,
		Stage:                 stage,
		TemplateID:            tmpl.ID,
		TemplateMediaURL:      templateMedia(task, tmpl),
		TemplateMediaOfficial: templateMediaOfficial(task, tmpl),
		Inputs:                task.Spec.Inputs,
		Duration:              task.Spec.Duration,
		Deadline:              r.deadline(task).Add(stageDeadlineGrace),
		FaceImageUploaded:     r.faceImageUploaded(task),
	}
	if stage == videogenv1alpha1.StageRender {
		w.Previous = stageStatus(task, videogenv1alpha1.StageAnalyze).Outputs
	}
	return w
}

func (r *VideoTaskReconciler) writeIfChanged(ctx context.Context, task *videogenv1alpha1.VideoTask, before *videogenv1alpha1.VideoTaskStatus) error {
	if equality.Semantic.DeepEqual(before, &task.Status) {
		return nil
	}
	return r.writeStatus(ctx, task)
}

// reroutesOf is the stage's reroutes, as its status counts them (0 if it has no entry yet).
func reroutesOf(task *videogenv1alpha1.VideoTask, name videogenv1alpha1.StageName) int32 {
	for _, st := range task.Status.Stages {
		if st.Name == name {
			return st.Reroutes
		}
	}
	return 0
}

// stageStatus returns the task's entry for a stage, adding a Pending one if missing.
func stageStatus(task *videogenv1alpha1.VideoTask, name videogenv1alpha1.StageName) *videogenv1alpha1.StageStatus {
	for i := range task.Status.Stages {
		if task.Status.Stages[i].Name == name {
			return &task.Status.Stages[i]
		}
	}
	task.Status.Stages = append(task.Status.Stages, videogenv1alpha1.StageStatus{Name: name, State: videogenv1alpha1.StagePending})
	return &task.Status.Stages[len(task.Status.Stages)-1]
}

func setProgress(task *videogenv1alpha1.VideoTask) {
	var p int32
	for _, st := range task.Status.Stages {
		switch st.Name {
		case videogenv1alpha1.StageAnalyze:
			p += st.Progress * analyzeWeight / 100
		case videogenv1alpha1.StageRender:
			p += st.Progress * (100 - analyzeWeight) / 100
		}
	}
	task.Status.Progress = clampProgress(p)
}

func clampProgress(p int32) int32 { return min(max(p, 0), 100) }

// until returns the wait before the next look: every, or less if the deadline comes first.
func until(now, deadline time.Time, every time.Duration) time.Duration {
	if left := deadline.Sub(now); left < every {
		return max(left, 10*time.Millisecond)
	}
	return every
}
