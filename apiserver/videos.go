package apiserver

import (
	"net/http"
	"strings"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/apikeys"
	"github.com/videogen-dev/videogen-operator/internal/imageinput"
)

// Request bodies. Pointers tell a missing field from an empty one.

type shortRequest struct {
	TemplateID *string      `json:"template_id"`
	Face       *string      `json:"face"`
	WebhookURL *string      `json:"webhook_url,omitempty"`
	Duration   *wholeNumber `json:"duration,omitempty"`
}

type eraserRequest struct {
	Video      *string `json:"video"`
	WebhookURL *string `json:"webhook_url,omitempty"`
}

type templateVideoRequest struct {
	TemplateID *string      `json:"template_id"`
	Duration   *wholeNumber `json:"duration"`
	WebhookURL *string      `json:"webhook_url,omitempty"`
}

type poseRequest struct {
	TemplateID *string `json:"template_id"`
	Face       *string `json:"face"`
	WebhookURL *string `json:"webhook_url,omitempty"`
}

// taskInput is a validated request, ready to be priced and created.
type taskInput struct {
	capability videogenv1alpha1.Capability
	templateID string
	faceURL    string
	face       *imageinput.Image // an inline face, stored before the ledger creates the task
	faceBlob   string            // the stored face's name in the blob store
	videoURL   string
	duration   *int32
	webhookURL string
}

func (s *Server) createShort(w http.ResponseWriter, r *http.Request, p apikeys.Principal) {
	var req shortRequest
	s.submit(w, r, p, &req, func() (taskInput, error) {
		var c fieldChecker
		c.required("template_id", req.TemplateID)
		c.required("face", req.Face)
		c.optional("webhook_url", req.WebhookURL)
		c.maxLength("template_id", req.TemplateID, maxTemplateIDLength)
		c.duration(req.Duration.int32s())
		if err := c.result(); err != nil {
			return taskInput{}, err
		}
		in := taskInput{capability: videogenv1alpha1.CapabilityShort, templateID: *req.TemplateID, duration: req.Duration.int32s()}
		return in, s.faceAndWebhook(&in, *req.Face, req.WebhookURL)
	})
}

func (s *Server) createPose(w http.ResponseWriter, r *http.Request, p apikeys.Principal) {
	var req poseRequest
	s.submit(w, r, p, &req, func() (taskInput, error) {
		var c fieldChecker
		c.required("template_id", req.TemplateID)
		c.required("face", req.Face)
		c.optional("webhook_url", req.WebhookURL)
		c.maxLength("template_id", req.TemplateID, maxTemplateIDLength)
		if err := c.result(); err != nil {
			return taskInput{}, err
		}
		in := taskInput{capability: videogenv1alpha1.CapabilityPose, templateID: *req.TemplateID}
		return in, s.faceAndWebhook(&in, *req.Face, req.WebhookURL)
	})
}

func (s *Server) createEraser(w http.ResponseWriter, r *http.Request, p apikeys.Principal) {
	var req eraserRequest
	s.submit(w, r, p, &req, func() (taskInput, error) {
		var c fieldChecker
		c.required("video", req.Video)
		c.optional("webhook_url", req.WebhookURL)
		if err := c.result(); err != nil {
			return taskInput{}, err
		}
		video := strings.TrimSpace(*req.Video)
		if !looksLikeURL(video) {
			return taskInput{}, badRequest("field \"video\" must be a public http(s) URL, starting with http:// or https://; base64 video is not accepted, upload it somewhere public first")
		}
		video, err := checkURL(s.cfg.URLPolicy, "video", video)
		if err != nil {
			return taskInput{}, err
		}
		in := taskInput{capability: videogenv1alpha1.CapabilityEraser, videoURL: video}
		return in, s.webhook(&in, req.WebhookURL)
	})
}

func (s *Server) createTemplateVideo(w http.ResponseWriter, r *http.Request, p apikeys.Principal) {
	var req templateVideoRequest
	s.submit(w, r, p, &req, func() (taskInput, error) {
		var c fieldChecker
		c.required("template_id", req.TemplateID)
		if req.Duration == nil {
			c.fail("field \"duration\" is required")
		}
		c.optional("webhook_url", req.WebhookURL)
		c.maxLength("template_id", req.TemplateID, maxTemplateIDLength)
		c.duration(req.Duration.int32s())
		if err := c.result(); err != nil {
			return taskInput{}, err
		}
		in := taskInput{capability: videogenv1alpha1.CapabilityTemplate, templateID: *req.TemplateID, duration: req.Duration.int32s()}
		return in, s.webhook(&in, req.WebhookURL)
	})
}

// faceAndWebhook accepts a face as an http(s) URL or as base64 (with or without a data: prefix).
func (s *Server) faceAndWebhook(in *taskInput, face string, webhookURL *string) error {
	face = strings.TrimSpace(face)
	if looksLikeURL(face) {
		u, err := checkURL(s.cfg.URLPolicy, "face", face)
		if err != nil {
			return err
		}
		in.faceURL = u
	} else {
		img, err := imageinput.DecodeBase64(face, s.cfg.ImageLimits)
		if err != nil {
			if urlWithoutScheme(face) {
				return badRequest("field \"face\" must be an http(s) URL starting with http:// or https://, or a base64 image (read as base64: %v)", err)
			}
			return badRequest("field \"face\": %v", err)
		}
		in.face = img
	}
	return s.webhook(in, webhookURL)
}

func (s *Server) webhook(in *taskInput, webhookURL *string) error {
	if webhookURL == nil {
		return nil
	}
	u, err := checkURL(s.cfg.URLPolicy, "webhook_url", strings.TrimSpace(*webhookURL))
	if err != nil {
		return err
	}
	in.webhookURL = u
	return nil
}

// urlWithoutScheme reports whether a face that is not valid base64 was meant as a URL: it has a
// '.' or a ':' (cdn.example.com/me.jpg, https:/cdn…), which the base64 alphabet lacks, and no
// data: prefix, whose ':' is base64's own.
func urlWithoutScheme(s string) bool {
	return strings.ContainsAny(s, ".:") && !strings.HasPrefix(strings.ToLower(s), "data:")
}

func looksLikeURL(s string) bool {
	l := strings.ToLower(s)
	return strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://") || strings.Contains(l, "://")
}
