package apiserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/blobstore"
	"github.com/videogen-dev/videogen-operator/internal/httpjson"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
)

// An inline face is stored before the ledger creates its task (the task carries its URL). A
// face whose task was not created, or is gone, is removed: at once where the ledger's answer
// shows that nothing uses it (faceUnused), otherwise by SweepFaces.

// FaceSweepAge is how long a stored face may go unreferenced before SweepFaces removes it. A
// submission stores its face and asks the ledger within seconds (a ledger call is bounded at
// 15 s), and the cache sees the created task a moment later: an hour leaves room for all of it.
const FaceSweepAge = time.Hour

// FaceSweepInterval is how often cmd/apiserver runs SweepFaces.
const FaceSweepInterval = 10 * time.Minute

// faceRemoveTimeout bounds removing one face, whether the client still waits or not.
const faceRemoveTimeout = 10 * time.Second

// faceUnused reports whether the face stored as blob for task name can go now that the ledger
// refused to create the task with err. keyed: the request had an Idempotency-Key, so another
// request with the key and the same face stores the same name (blobstore.ContentName).
func (s *Server) faceUnused(ctx context.Context, account, name, blob string, keyed bool, err error) bool {
	var short *ledger.InsufficientBalanceError
	var refused *ledger.RefusedError
	switch {
	case errors.Is(err, ledger.ErrNoAnswer):
		return false // the create may have landed, or may still (also when the name is taken by it)
	case errors.Is(err, ledger.ErrTaskExists):
		// The task of this name is another request's: the face is still used if it is its face
		// too, and may be if the task is still being created.
		task := &videogenv1alpha1.VideoTask{}
		if s.readStored(ctx, client.ObjectKey{Namespace: account, Name: name}, task) != nil {
			return false
		}
		return blobstore.NameIn(task.Spec.Inputs.FaceImageURL) != blob
	case errors.As(err, &short), errors.Is(err, ledger.ErrAccountSuspended), errors.Is(err, ledger.ErrAccountClosing),
		errors.Is(err, ledger.ErrAccountNotFound), errors.Is(err, ledger.ErrNotReady), errors.As(err, &refused):
		// Nothing was created, but a request with the same key and face may be admitted yet
		// (after a top-up, a refund, a failover or a raised quota) and use the one stored object.
		return !keyed
	default:
		// No answer, or an unexpected error: the create may have landed, or may still.
		return false
	}
}

// removeFace deletes blob, best effort: SweepFaces takes what this leaves.
func (s *Server) removeFace(ctx context.Context, blob string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), faceRemoveTimeout)
	defer cancel()
	if err := s.cfg.Blobs.Delete(rctx, blob); err != nil {
		s.cfg.Logger.WarnContext(ctx, "removing the face of a task not created; the sweep will",
			"request_id", httpjson.RequestID(ctx), "blob", blob, "error", err.Error())
	}
}

// SweepFaces removes the inline faces last stored before cutoff that no VideoTask references:
// those of submissions that created no task (the process died, or the ledger's answer left it
// open), and those of tasks deleted since (the finished-task collector). It returns how many
// it removed. Every replica may sweep: each one checks the same tasks.
//
// The faces first, then the tasks: a task created before the tasks are read is seen. A face is
// stored before its task is created, but a request with an Idempotency-Key stores the same
// name as an earlier one with the key (blobstore.ContentName), so a candidate listed by its
// old put may be put again while the sweep runs, for a task created after the tasks were read:
// each candidate's put is read again just before it is deleted, and one put since the cutoff
// is kept. What is left is a put that lands between that read and the delete (one round trip
// to the store) of a face last put over FaceSweepAge ago, for a task not yet in the tasks read.
func (s *Server) SweepFaces(ctx context.Context, cutoff time.Time) (int, error) {
	var old []string
	err := s.cfg.Blobs.List(ctx, func(name string, put time.Time) error {
		if blobstore.IsContentName(name) && put.Before(cutoff) {
			old = append(old, name)
		}
		return nil
	})
	if err != nil || len(old) == 0 {
		return 0, err
	}
	var tasks videogenv1alpha1.VideoTaskList
	if err := s.cfg.Client.List(ctx, &tasks, client.UnsafeDisableDeepCopy); err != nil {
		return 0, fmt.Errorf("listing tasks: %w", err)
	}
	used := make(map[string]bool, len(tasks.Items))
	for i := range tasks.Items {
		if blob := blobstore.NameIn(tasks.Items[i].Spec.Inputs.FaceImageURL); blob != "" {
			used[blob] = true
		}
	}
	removed := 0
	var errs []error
	for _, blob := range old {
		if used[blob] {
			continue
		}
		switch put, err := s.cfg.Blobs.Stat(ctx, blob); {
		case errors.Is(err, blobstore.ErrNotFound):
			continue // removed meanwhile (another replica's sweep)
		case err != nil:
			errs = append(errs, err)
			continue
		case !put.Before(cutoff):
			continue // put again since it was listed: a retry with its key, whose task may be on its way
		}
		if err := s.cfg.Blobs.Delete(ctx, blob); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}

// RunFaceSweep runs SweepFaces every FaceSweepInterval until ctx ends, removing faces
// unreferenced for FaceSweepAge.
func (s *Server) RunFaceSweep(ctx context.Context) error {
	t := time.NewTicker(FaceSweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		removed, err := s.SweepFaces(ctx, s.cfg.Clock.Now().Add(-FaceSweepAge))
		switch {
		case err != nil && ctx.Err() == nil:
			s.cfg.Logger.ErrorContext(ctx, "sweeping stored faces", "removed", removed, "error", err.Error())
		case removed > 0:
			s.cfg.Logger.InfoContext(ctx, "removed stored faces that no task uses", "removed", removed)
		}
	}
}
