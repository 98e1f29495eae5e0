package jobbackend_test

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/generation"
	"github.com/videogen-dev/videogen-operator/internal/generation/jobbackend"
)

// Every input goes into
// every container's env (init containers too), so a Job's size is about its inputs times its
// containers: a render with analyze outputs just under the per-string exec limit (job_exec_arg_limit_test.go)
// (128 KiB: an HTTP backend's analyze, handed to a Job render after a route change, or a Job
// image's analyze whose termination message is read whole) in a pod template of a dozen
// containers (a fetcher, sidecars, a GPU step per model) is a Job of 1.5 MiB or more. Input:
// such a Submit. What the kube-apiserver answers (envtest, the real one, 1.37): over its
// request body limit (3 MiB) a 413 RequestEntityTooLarge, which is not Invalid, so Submit
// returned it as an ordinary error: the controller retried it as an outage ("backend
// unavailable", a Warning event, the points held) at every poll until the task's timeout (up
// to 30 days), when the task failed as timed out, refunded, telling nobody why; the same Job
// is refused the same way at every retry. Over etcd's request limit (1.5 MiB by default) but
// under 3 MiB, not etcd's "request is too large": the create handler retries without
// managedFields, and the Job, whose selector the first try generated, fails validation
// ("spec.selector: `selector` not auto-generated", "controller-uid must be …"): a 422, so
// permanent already, but the task failed "the render stage was refused: creating Job …: is
// invalid: [spec.template.metadata.labels[controller-uid] …]", which says nothing of the
// cause. (A Job just under etcd's limit is stored, and its pods, as large plus their status,
// may not be.) The fix: Submit refuses a Job over 1 MiB before sending it, as a permanent
// error that says it is too large and why, and takes a 413 as permanent too.
var _ = Describe("A Job too large for the Kubernetes API", func() {
	for _, tc := range []struct {
		name       string
		containers int
	}{
		{"over etcd's limit (a 422 about its selector)", 14},
		{"over the request body limit (413)", 30},
	} {
		It("fails the stage at once as permanent, "+tc.name, func() {
			ns := newNamespace()
			task := newTask(ns, "big-render")
			var ctrs strings.Builder
			for i := range tc.containers {
				fmt.Fprintf(&ctrs, "          - name: step-%d\n            image: example.com/step:1.0\n", i)
			}
			config, err := jobbackend.ParseConfig([]byte("capabilities:\n  video.short:\n    resultContainer: step-0\n    template:\n      spec:\n        containers:\n" + ctrs.String()))
			Expect(err).NotTo(HaveOccurred())
			b, err := jobbackend.New(k8sClient, config)
			Expect(err).NotTo(HaveOccurred())

			w := workFor(task, videogenv1alpha1.StageRender)
			w.Previous = map[string]string{"landmarks": strings.Repeat("1,", 60<<10)} // 120 KiB: under the exec limit
			_, err = b.Submit(ctx, w)
			Expect(err).To(HaveOccurred())
			Expect(generation.IsPermanent(err)).To(BeTrue(), "retried as an outage until the task's timeout: %v", err)
			Expect(err.Error()).To(ContainSubstring("too large"))
			var jobs batchv1.JobList
			Expect(k8sClient.List(ctx, &jobs, client.InNamespace(ns))).To(Succeed())
			Expect(jobs.Items).To(BeEmpty())
		})
	}
})
