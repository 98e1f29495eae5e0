package apiserver

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/httpjson"
	"github.com/videogen-dev/videogen-operator/internal/ledger"
	"github.com/videogen-dev/videogen-operator/internal/taskview"
)

// list is the envelope of every list response.
type list[T any] struct {
	Object  string `json:"object"`
	Data    []T    `json:"data"`
	HasMore bool   `json:"has_more"`
}

// getTask reads a task of the caller's account; a task of another account is simply not found.
func (s *Server) getTask(w http.ResponseWriter, r *http.Request, p apikeys.Principal) {
	task, ok := s.findTask(w, r, p)
	if !ok {
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, taskview.Of(task))
}

// findTask reads from the cache (accountReader) and, on a miss, around it (a task just created
// by another replica). It answers 404 itself.
func (s *Server) findTask(w http.ResponseWriter, r *http.Request, p apikeys.Principal) (*videogenv1alpha1.VideoTask, bool) {
	key := client.ObjectKey{Namespace: p.Account, Name: r.PathValue("id")}
	if len(validation.IsDNS1123Subdomain(key.Name)) > 0 { // ".." or a '/' can name no task
		httpjson.WriteError(w, r, http.StatusNotFound, httpjson.CodeNotFound, "no task with id "+httpjson.Echo(key.Name))
		return nil, false
	}
	task := &videogenv1alpha1.VideoTask{}
	err := s.accountReader(p).Get(r.Context(), key, task)
	if apierrors.IsNotFound(err) {
		err = s.cfg.APIReader.Get(r.Context(), key, task)
	}
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsInvalid(err):
		httpjson.WriteError(w, r, http.StatusNotFound, httpjson.CodeNotFound, "no task with id "+httpjson.Echo(key.Name))
		return nil, false
	case err != nil:
		s.internalError(w, r, err)
		return nil, false
	}
	return task, true
}

// listTasks returns the caller's tasks, newest first, with cursor pagination (limit, after).
func (s *Server) listTasks(w http.ResponseWriter, r *http.Request, p apikeys.Principal) {
	q, err := queryParams(r, "limit", "after")
	if writeRequestError(w, r, err) {
		return
	}
	limit := 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			httpjson.WriteError(w, r, http.StatusBadRequest, httpjson.CodeInvalidRequest, "query parameter \"limit\" must be a whole number from 1 to 100")
			return
		}
		limit = n
	}
	var tasks videogenv1alpha1.VideoTaskList
	if err := s.accountReader(p).List(r.Context(), &tasks, client.InNamespace(p.Account)); err != nil {
		s.internalError(w, r, err)
		return
	}
	items := tasks.Items
	sort.Slice(items, func(i, j int) bool { return newerFirst(&items[i], &items[j]) })
	start := 0
	if after := q.Get("after"); after != "" {
		if len(validation.IsDNS1123Subdomain(after)) > 0 {
			httpjson.WriteError(w, r, http.StatusBadRequest, httpjson.CodeInvalidRequest,
				"query parameter \"after\" takes the id of a task of the list's last page (\"id\"); "+
					httpjson.Echo(after)+" can be no task's id")
			return
		}
		cursor, err := s.cursorTask(r.Context(), p.Account, after, items)
		if apierrors.IsNotFound(err) {
			// A finished task is deleted after the manager's --finished-task-ttl: a page's last
			// task may go while a slow client pages on, and its id then places nothing.
			httpjson.WriteError(w, r, http.StatusBadRequest, httpjson.CodeInvalidRequest,
				"query parameter \"after\": no task with id "+httpjson.Echo(after)+
					" (finished tasks are deleted a while after they end: list again from the first page)")
			return
		}
		if err != nil {
			s.internalError(w, r, err)
			return
		}
		// The page starts at the first task older than the cursor's, in the listing's order.
		start = sort.Search(len(items), func(i int) bool { return newerFirst(cursor, &items[i]) })
	}
	page := list[taskview.Task]{Object: "list", Data: []taskview.Task{}}
	for i := start; i < len(items) && len(page.Data) < limit; i++ {
		page.Data = append(page.Data, taskview.Of(&items[i]))
	}
	page.HasMore = start+len(page.Data) < len(items)
	httpjson.WriteJSON(w, http.StatusOK, page)
}

// cursorTask is the task an `after` cursor names: from the listed items, else read around the
// cache, since another replica (whose cache was ahead) may have ended the previous page with a
// task this replica's cache has not seen yet. NotFound: no such task (any more).
func (s *Server) cursorTask(ctx context.Context, account, name string, items []videogenv1alpha1.VideoTask) (*videogenv1alpha1.VideoTask, error) {
	for i := range items {
		if items[i].Name == name {
			return &items[i], nil
		}
	}
	// name is a valid object name: listTasks refused any other.
	notFound := apierrors.NewNotFound(videogenv1alpha1.GroupVersion.WithResource("videotasks").GroupResource(), name)
	task := &videogenv1alpha1.VideoTask{}
	err := s.cfg.APIReader.Get(ctx, client.ObjectKey{Namespace: account, Name: name}, task)
	if apierrors.IsInvalid(err) {
		return nil, notFound
	}
	return task, err
}

func newerFirst(a, b *videogenv1alpha1.VideoTask) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.After(b.CreationTimestamp.Time)
	}
	return a.Name > b.Name
}

// cancelTask asks the controller to stop a queued or running task; its points are refunded.
// It is idempotent: a repeated cancel answers 202 while the work is being stopped, and 200
// with the task once it is canceled, so a client retrying a cancel never sees an error.
func (s *Server) cancelTask(w http.ResponseWriter, r *http.Request, p apikeys.Principal) {
	if writeRequestError(w, r, noBody(w, r)) {
		return
	}
	task, ok := s.findTask(w, r, p)
	if !ok {
		return
	}
	if task.Status.Phase.Terminal() {
		// An ended task never runs again, but the cache may still show an earlier task of this
		// id: a keyed task deleted after --finished-task-ttl and created again with the same
		// Idempotency-Key. Refuse the cancel only of the task as stored.
		fresh := &videogenv1alpha1.VideoTask{}
		err := s.readStored(r.Context(), client.ObjectKeyFromObject(task), fresh)
		if apierrors.IsNotFound(err) {
			httpjson.WriteError(w, r, http.StatusNotFound, httpjson.CodeNotFound, "no task with id "+strconv.Quote(task.Name))
			return
		}
		if err != nil {
			s.internalError(w, r, err)
			return
		}
		if task = fresh; task.Status.Phase.Terminal() {
			answerEnded(w, r, task)
			return
		}
	}
	wctx, cancel := context.WithTimeout(r.Context(), clusterWriteTimeout)
	err := requestCancel(wctx, s.cfg.Client, task)
	cancel()
	if err != nil {
		if apierrors.IsNotFound(err) {
			httpjson.WriteError(w, r, http.StatusNotFound, httpjson.CodeNotFound, "no task with id "+strconv.Quote(task.Name))
			return
		}
		landed, ok := s.cancelLanded(r.Context(), task)
		if !ok {
			// Not recorded as far as a read can tell (or no read answered): the patch's own
			// error says why, a 503 while the cluster does not answer. A retry is safe.
			s.internalError(w, r, err)
			return
		}
		task = landed
	}
	// The patch answers with the task as stored: a cache that lagged may have shown a task
	// that had ended already, and then the cancel changed nothing.
	if task.Status.Phase.Terminal() {
		answerEnded(w, r, task)
		return
	}
	httpjson.WriteJSON(w, http.StatusAccepted, taskview.Of(task))
}

// cancelLanded is task as stored when its cancel annotation is there: a patch that failed
// (a 504 "request did not complete within requested timeout", a connection dropped after the
// request was sent) may have landed, and then the cancel is done as asked, not a 500.
func (s *Server) cancelLanded(ctx context.Context, task *videogenv1alpha1.VideoTask) (*videogenv1alpha1.VideoTask, bool) {
	stored := &videogenv1alpha1.VideoTask{}
	if err := s.readStored(ctx, client.ObjectKeyFromObject(task), stored); err != nil || stored.UID != task.UID {
		return nil, false
	}
	_, asked := stored.Annotations[videogenv1alpha1.AnnotationCancelRequested] // any value, as the controller reads it
	return stored, asked
}

// answerEnded answers a cancel of a task that has ended: 200 with the task if it ended
// canceled (the cancel asked for is done), 409 if it ended otherwise.
func answerEnded(w http.ResponseWriter, r *http.Request, task *videogenv1alpha1.VideoTask) {
	if status := taskview.Status(task); status != taskview.StatusCanceled {
		httpjson.WriteError(w, r, http.StatusConflict, httpjson.CodeConflict,
			"task "+task.Name+" already "+status+" and cannot be canceled")
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, taskview.Of(task))
}

// requestCancel sets the cancel annotation with a merge patch (no read-modify-write race).
func requestCancel(ctx context.Context, c client.Client, task *videogenv1alpha1.VideoTask) error {
	patch := []byte(`{"metadata":{"annotations":{"` + videogenv1alpha1.AnnotationCancelRequested + `":"true"}}}`)
	return c.Patch(ctx, task, client.RawPatch("application/merge-patch+json", patch))
}

// Balance is the caller's points.
type Balance struct {
	Object   string `json:"object"`
	Balance  int64  `json:"balance"`
	Frozen   int64  `json:"frozen"`
	Spent    int64  `json:"spent"`
	Credited int64  `json:"credited"`
}

// getBalance answers with the ledger's figures, which count every task admitted so far by any
// replica: a balance read after a 202 shows that task's freeze.
func (s *Server) getBalance(w http.ResponseWriter, r *http.Request, p apikeys.Principal) {
	f, err := s.cfg.Ledger.Balance(r.Context(), p.Account)
	switch {
	case errors.Is(err, ledger.ErrAccountNotFound):
		// 404 for the GET of what is not there, with the code a task's POST answers for the same
		// account (403 there): a client handles account_not_found once.
		httpjson.WriteError(w, r, http.StatusNotFound, "account_not_found", "this API key's account has no points account; contact your administrator")
		return
	case errors.Is(err, ledger.ErrNotReady):
		w.Header().Set("Retry-After", "5")
		httpjson.WriteError(w, r, http.StatusServiceUnavailable, httpjson.CodeUnavailable, notReadyMessage(err))
		return
	case errors.Is(err, ledger.ErrNoAnswer):
		w.Header().Set("Retry-After", "5")
		httpjson.WriteError(w, r, http.StatusServiceUnavailable, httpjson.CodeUnavailable, "the points ledger did not answer in time; retry shortly")
		return
	case err != nil:
		s.internalError(w, r, err)
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, Balance{Object: "balance", Balance: f.Balance, Frozen: f.Frozen, Spent: f.Spent, Credited: f.Credited})
}
