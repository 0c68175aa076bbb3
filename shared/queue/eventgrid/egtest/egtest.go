// Package egtest is a mock at the edge: an HTTPS server speaking Azure Event Grid's data-plane
// wire protocol, because no Event Grid emulator runs offline. It is written from the documented
// REST shapes and made as strict as the service on what Dovetail touches:
//
//   - custom topics: POST /api/events?api-version=2018-01-01 with the aeg-sas-key header and
//     Content-Type application/cloudevents-batch+json (a JSON array of CloudEvents 1.0), each
//     event ≤ 1 MB and the request ≤ 1 MB; events are pushed to each subscription's endpoint in
//     batches (maxEventsPerBatch), retried on any status but 200–204 after the subscription's
//     delays, and dead-lettered after maxDeliveryAttempts with Event Grid's metadata
//     (deadLetterReason MaxDeliveryAttemptsExceeded, deliveryAttempts, lastHttpStatusCode); 400
//     and 413 are not retried (UndeliverableDueToHttpBadRequest / …EntityTooLarge), as documented;
//   - namespace topics (api-version 2024-06-01): :publish (single or batch CloudEvents, header
//     "Authorization: SharedAccessKey <key>"), and on a queue subscription :receive (maxEvents
//     1..100, maxWaitTime 10..120 s, long poll), :acknowledge, :release (releaseDelayInSeconds
//     0, 10, 60, 600 or 3600), :reject and :renewLock with lock tokens (1..100, each valid only
//     while its lock holds), deliveryCount, lock expiry → redelivery, and maxDeliveryCount →
//     dead letter; reject dead-letters at once.
//
// Anything else is refused with the service's error shape ({"error":{"code","message"}}).
package egtest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Service limits (Azure Event Grid documentation, "Event Grid quotas and limits"; namespace
// REST API 2024-06-01).
const (
	MaxEventBytes   = 1 << 20
	MaxRequestBytes = 1 << 20
	TopicAPIVersion = "2018-01-01"
	NSAPIVersion    = "2024-06-01"
)

// DeadLetter is an event Event Grid gave up on, with the metadata it records.
type DeadLetter struct {
	Topic, Subscription string
	Reason              string // deadLetterReason
	DeliveryAttempts    int
	LastHTTPStatusCode  int
	Event               json.RawMessage
}

// PushSubscription is a custom topic's event subscription with push delivery.
type PushSubscription struct {
	Name string
	// Endpoint receives POSTs of CloudEvents batches (Content-Type
	// application/cloudevents-batch+json; charset=utf-8).
	Endpoint string
	// Client is the HTTP client of deliveries; default http.DefaultClient.
	Client *http.Client
	// MaxEventsPerBatch (1..5000; default 1, the service's).
	MaxEventsPerBatch int
	// MaxDeliveryAttempts (1..30; default 30, the service's).
	MaxDeliveryAttempts int
	// RetryDelays between attempts (the last repeats); the service's schedule starts at 10 s,
	// tests shorten it. Default 10 ms.
	RetryDelays []time.Duration
}

// QueueSubscription is a namespace topic's event subscription with queue (pull) delivery.
type QueueSubscription struct {
	Name string
	// LockDuration (receiveLockDurationInSeconds, 60..300 s in the service; tests may shorten it);
	// default 60 s.
	LockDuration time.Duration
	// MaxDeliveryCount (1..10; default 10).
	MaxDeliveryCount int
}

// Server is the mock. Create it with New; Close it when done.
type Server struct {
	*httptest.Server
	Key string

	mu          sync.Mutex
	cond        *sync.Cond
	topics      map[string][]*PushSubscription // custom topic name → subscriptions
	nsTopics    map[string]map[string]*queueSub
	deadLetters []DeadLetter
	published   map[string]int // topic → events accepted
	deliveries  sync.WaitGroup
	closed      bool
}

type queueSub struct {
	cfg    QueueSubscription
	topic  string
	events []*held
}

type held struct {
	event     json.RawMessage
	count     int // deliveries so far
	lockToken string
	lockedTil time.Time
	availAt   time.Time
}

// New starts the mock on a loopback TLS port (the SDK refuses keys over plain HTTP); use
// s.Client() as the SDK's transport.
func New() *Server {
	s := &Server{Key: "egtest-key", topics: map[string][]*PushSubscription{}, nsTopics: map[string]map[string]*queueSub{}, published: map[string]int{}}
	s.cond = sync.NewCond(&s.mu)
	s.Server = httptest.NewTLSServer(http.HandlerFunc(s.serve))
	go func() { // wake long polls so lock expiries and release delays are seen
		for {
			time.Sleep(20 * time.Millisecond)
			s.mu.Lock()
			if s.closed {
				s.mu.Unlock()
				return
			}
			s.cond.Broadcast()
			s.mu.Unlock()
		}
	}()
	return s
}

// Close stops deliveries and the server.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	s.cond.Broadcast()
	s.mu.Unlock()
	s.deliveries.Wait()
	s.Server.Close()
}

// TopicEndpoint is a custom topic's endpoint as the portal shows it (…/api/events).
func (s *Server) TopicEndpoint(topic string) string { return s.URL + "/" + topic + "/api/events" }

// AddTopic creates a custom topic with push subscriptions.
func (s *Server) AddTopic(topic string, subs ...PushSubscription) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range subs {
		sub := subs[i]
		if sub.MaxEventsPerBatch == 0 {
			sub.MaxEventsPerBatch = 1
		}
		if sub.MaxDeliveryAttempts == 0 {
			sub.MaxDeliveryAttempts = 30
		}
		if len(sub.RetryDelays) == 0 {
			sub.RetryDelays = []time.Duration{10 * time.Millisecond}
		}
		if sub.Client == nil {
			sub.Client = http.DefaultClient
		}
		s.topics[topic] = append(s.topics[topic], &sub)
	}
	if s.topics[topic] == nil {
		s.topics[topic] = []*PushSubscription{}
	}
}

// AddNamespaceTopic creates a namespace topic with queue subscriptions.
func (s *Server) AddNamespaceTopic(topic string, subs ...QueueSubscription) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[string]*queueSub{}
	for _, q := range subs {
		if q.LockDuration == 0 {
			q.LockDuration = 60 * time.Second
		}
		if q.MaxDeliveryCount == 0 {
			q.MaxDeliveryCount = 10
		}
		m[q.Name] = &queueSub{cfg: q, topic: topic}
	}
	s.nsTopics[topic] = m
}

// DeadLetters returns what Event Grid dead-lettered so far.
func (s *Server) DeadLetters() []DeadLetter {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]DeadLetter(nil), s.deadLetters...)
}

// Published is how many events a topic accepted.
func (s *Server) Published(topic string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.published[topic]
}

// Pending is how many events a queue subscription still holds (available, locked or delayed).
func (s *Server) Pending(topic, sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.nsTopics[topic][sub]; q != nil {
		return len(q.events)
	}
	return 0
}

// WaitDelivered waits until every push delivery in flight has ended (success or dead letter).
func (s *Server) WaitDelivered() { s.deliveries.Wait() }

func writeError(w http.ResponseWriter, status int, code, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": fmt.Sprintf(format, args...)}})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "%s is not allowed", r.Method)
		return
	}
	if strings.HasSuffix(r.URL.Path, "/api/events") {
		s.publishTopic(w, r, strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/"), "/api/events"))
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/topics/")
	if !ok {
		writeError(w, http.StatusNotFound, "NotFound", "no resource at %s", r.URL.Path)
		return
	}
	if r.URL.Query().Get("api-version") != NSAPIVersion {
		writeError(w, http.StatusBadRequest, "BadRequest", "api-version %q is not supported; use %s", r.URL.Query().Get("api-version"), NSAPIVersion)
		return
	}
	if r.Header.Get("Authorization") != "SharedAccessKey "+s.Key {
		writeError(w, http.StatusUnauthorized, "Unauthorized", "the request is not authorized")
		return
	}
	if topic, ok := strings.CutSuffix(rest, ":publish"); ok {
		s.publishNamespace(w, r, topic)
		return
	}
	topic, op, _ := strings.Cut(rest, "/eventsubscriptions/")
	sub, action, ok := strings.Cut(op, ":")
	s.mu.Lock()
	q := s.nsTopics[topic][sub]
	s.mu.Unlock()
	if !ok || q == nil {
		writeError(w, http.StatusNotFound, "NotFound", "topic %q subscription %q not found", topic, sub)
		return
	}
	switch action {
	case "receive":
		s.receive(w, r, q)
	case "acknowledge", "release", "reject", "renewLock":
		s.lockOp(w, r, q, action)
	default:
		writeError(w, http.StatusNotFound, "NotFound", "operation %q not found", action)
	}
}

// readEvents reads and validates the CloudEvents of a publish request.
func readEvents(w http.ResponseWriter, r *http.Request, batchOnly bool) ([]json.RawMessage, bool) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || (mt != "application/cloudevents-batch+json" && (batchOnly || mt != "application/cloudevents+json")) ||
		(params["charset"] != "" && !strings.EqualFold(params["charset"], "utf-8")) {
		writeError(w, http.StatusBadRequest, "BadRequest", "Content-Type %q: CloudEvents schema requires application/cloudevents-batch+json", r.Header.Get("Content-Type"))
		return nil, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, "BadRequest", "reading body: %v", err)
		return nil, false
	}
	if len(body) > MaxRequestBytes {
		writeError(w, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge", "the request exceeds %d bytes", MaxRequestBytes)
		return nil, false
	}
	var evs []json.RawMessage
	if mt == "application/cloudevents+json" {
		evs = []json.RawMessage{body}
	} else if err := json.Unmarshal(body, &evs); err != nil {
		writeError(w, http.StatusBadRequest, "BadRequest", "body is not a JSON array of events: %v", err)
		return nil, false
	}
	if len(evs) == 0 {
		writeError(w, http.StatusBadRequest, "BadRequest", "no events in the request")
		return nil, false
	}
	for i, e := range evs {
		if msg := validateCloudEvent(e); msg != "" {
			writeError(w, http.StatusBadRequest, "BadRequest", "event %d: %s", i, msg)
			return nil, false
		}
	}
	return evs, true
}

func validateCloudEvent(e json.RawMessage) string {
	if len(e) > MaxEventBytes {
		return fmt.Sprintf("event is %d bytes, more than %d", len(e), MaxEventBytes)
	}
	var attrs map[string]json.RawMessage
	if err := json.Unmarshal(e, &attrs); err != nil {
		return "not a JSON object: " + err.Error()
	}
	for _, a := range []string{"id", "source", "type", "specversion"} {
		var v string
		if json.Unmarshal(attrs[a], &v) != nil || v == "" {
			return fmt.Sprintf("required attribute %q missing or not a non-empty string", a)
		}
	}
	var sv string
	_ = json.Unmarshal(attrs["specversion"], &sv)
	if sv != "1.0" {
		return fmt.Sprintf("specversion %q is not 1.0", sv)
	}
	if _, has := attrs["data"]; has {
		if _, has64 := attrs["data_base64"]; has64 {
			return "both data and data_base64"
		}
	}
	return ""
}

func (s *Server) publishTopic(w http.ResponseWriter, r *http.Request, topic string) {
	if r.URL.Query().Get("api-version") != TopicAPIVersion {
		writeError(w, http.StatusBadRequest, "BadRequest", "api-version %q is not supported; use %s", r.URL.Query().Get("api-version"), TopicAPIVersion)
		return
	}
	if r.Header.Get("aeg-sas-key") != s.Key {
		writeError(w, http.StatusUnauthorized, "Unauthorized", "the request is not authorized")
		return
	}
	s.mu.Lock()
	subs, ok := s.topics[topic]
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "NotFound", "topic %q not found", topic)
		return
	}
	evs, ok := readEvents(w, r, true)
	if !ok {
		return
	}
	s.mu.Lock()
	s.published[topic] += len(evs)
	s.mu.Unlock()
	for _, sub := range subs {
		for start := 0; start < len(evs); start += sub.MaxEventsPerBatch {
			batch := evs[start:min(start+sub.MaxEventsPerBatch, len(evs))]
			s.deliveries.Add(1)
			go s.push(topic, sub, batch)
		}
	}
	w.WriteHeader(http.StatusOK)
}

// Push delivers a batch to a topic's subscription again and waits for the outcome: Event Grid
// delivers at least once, and a test uses this to deliver twice.
func (s *Server) Push(topic, subscription string, batch []json.RawMessage) {
	s.mu.Lock()
	var sub *PushSubscription
	for _, p := range s.topics[topic] {
		if p.Name == subscription {
			sub = p
		}
	}
	s.mu.Unlock()
	if sub == nil {
		panic("egtest: no subscription " + subscription + " on topic " + topic)
	}
	s.deliveries.Add(1)
	s.push(topic, sub, batch)
}

func (s *Server) push(topic string, sub *PushSubscription, batch []json.RawMessage) {
	defer s.deliveries.Done()
	body, _ := json.Marshal(batch)
	status := 0
	for attempt := 1; ; attempt++ {
		req, _ := http.NewRequest(http.MethodPost, sub.Endpoint, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/cloudevents-batch+json; charset=utf-8")
		req.Header.Set("aeg-delivery-count", strconv.Itoa(attempt-1))
		req.Header.Set("aeg-subscription-name", strings.ToUpper(sub.Name))
		resp, err := sub.Client.Do(req)
		status = 0
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			status = resp.StatusCode
		}
		if status >= 200 && status <= 204 {
			return
		}
		reason := ""
		switch {
		case status == http.StatusBadRequest:
			reason = "UndeliverableDueToHttpBadRequest"
		case status == http.StatusRequestEntityTooLarge:
			reason = "UndeliverableDueToHttpEntityTooLarge"
		case attempt >= sub.MaxDeliveryAttempts:
			reason = "MaxDeliveryAttemptsExceeded"
		}
		s.mu.Lock()
		closed := s.closed
		if reason != "" {
			for _, e := range batch {
				s.deadLetters = append(s.deadLetters, DeadLetter{Topic: topic, Subscription: sub.Name, Reason: reason, DeliveryAttempts: attempt,
					LastHTTPStatusCode: status, Event: e})
			}
		}
		s.mu.Unlock()
		if reason != "" || closed {
			return
		}
		time.Sleep(sub.RetryDelays[min(attempt-1, len(sub.RetryDelays)-1)])
	}
}

func (s *Server) publishNamespace(w http.ResponseWriter, r *http.Request, topic string) {
	s.mu.Lock()
	subs, ok := s.nsTopics[topic]
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "NotFound", "topic %q not found", topic)
		return
	}
	evs, ok := readEvents(w, r, false)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.published[topic] += len(evs)
	for _, q := range subs {
		for _, e := range evs {
			q.events = append(q.events, &held{event: e})
		}
	}
	s.cond.Broadcast()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte("{}"))
}

func intParam(r *http.Request, name string, def, lo, hi int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s %q: must be an integer within %d..%d", name, v, lo, hi)
	}
	return n, nil
}

func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// expire returns events whose lock lapsed to the available set, and dead-letters those that hit
// maxDeliveryCount. Call with s.mu held.
func (s *Server) expire(q *queueSub, now time.Time) {
	kept := q.events[:0]
	for _, h := range q.events {
		if h.lockToken != "" && now.After(h.lockedTil) {
			h.lockToken = ""
			if h.count >= q.cfg.MaxDeliveryCount {
				s.deadLetters = append(s.deadLetters, DeadLetter{Topic: q.topic, Subscription: q.cfg.Name, Reason: "MaxDeliveryCountExceeded",
					DeliveryAttempts: h.count, Event: h.event})
				continue
			}
		}
		kept = append(kept, h)
	}
	q.events = kept
}

func (s *Server) receive(w http.ResponseWriter, r *http.Request, q *queueSub) {
	maxEvents, err := intParam(r, "maxEvents", 1, 1, 100)
	if err == nil {
		var wait int
		wait, err = intParam(r, "maxWaitTime", 60, 10, 120)
		if err == nil {
			s.receiveWait(w, r, q, maxEvents, time.Duration(wait)*time.Second)
			return
		}
	}
	writeError(w, http.StatusBadRequest, "BadRequest", "%v", err)
}

func (s *Server) receiveWait(w http.ResponseWriter, r *http.Request, q *queueSub, maxEvents int, wait time.Duration) {
	deadline := time.Now().Add(wait)
	type detail struct {
		BrokerProperties struct {
			LockToken     string `json:"lockToken"`
			DeliveryCount int    `json:"deliveryCount"`
		} `json:"brokerProperties"`
		Event json.RawMessage `json:"event"`
	}
	out := []detail{}
	s.mu.Lock()
	for {
		now := time.Now()
		s.expire(q, now)
		for _, h := range q.events {
			if len(out) == maxEvents {
				break
			}
			if h.lockToken == "" && !now.Before(h.availAt) {
				h.count++
				h.lockToken, h.lockedTil = newToken(), now.Add(q.cfg.LockDuration)
				var d detail
				d.BrokerProperties.LockToken, d.BrokerProperties.DeliveryCount, d.Event = h.lockToken, h.count, h.event
				out = append(out, d)
			}
		}
		if len(out) > 0 || now.After(deadline) || s.closed || r.Context().Err() != nil {
			break
		}
		s.cond.Wait()
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"value": out})
}

func (s *Server) lockOp(w http.ResponseWriter, r *http.Request, q *queueSub, action string) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeError(w, http.StatusBadRequest, "BadRequest", "Content-Type %q: want application/json", r.Header.Get("Content-Type"))
		return
	}
	var body struct {
		LockTokens []string `json:"lockTokens"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, MaxRequestBytes)).Decode(&body); err != nil || len(body.LockTokens) == 0 || len(body.LockTokens) > 100 {
		writeError(w, http.StatusBadRequest, "BadRequest", "lockTokens: 1..100 tokens required")
		return
	}
	var delay time.Duration
	if action == "release" {
		switch v := r.URL.Query().Get("releaseDelayInSeconds"); v {
		case "", "0", "10", "60", "600", "3600":
			n, _ := strconv.Atoi(v)
			delay = time.Duration(n) * time.Second
		default:
			writeError(w, http.StatusBadRequest, "BadRequest", "releaseDelayInSeconds %q: must be 0, 10, 60, 600 or 3600", v)
			return
		}
	}
	type failed struct {
		LockToken string            `json:"lockToken"`
		Error     map[string]string `json:"error"`
	}
	res := struct {
		Failed    []failed `json:"failedLockTokens"`
		Succeeded []string `json:"succeededLockTokens"`
	}{Failed: []failed{}, Succeeded: []string{}}
	s.mu.Lock()
	now := time.Now()
	s.expire(q, now)
	for _, tok := range body.LockTokens {
		i := -1
		for j, h := range q.events {
			if h.lockToken != "" && h.lockToken == tok {
				i = j
			}
		}
		if i < 0 {
			res.Failed = append(res.Failed, failed{LockToken: tok, Error: map[string]string{"code": "TokenLost", "message": "token has expired or is not valid"}})
			continue
		}
		h := q.events[i]
		switch action {
		case "acknowledge":
			q.events = append(q.events[:i], q.events[i+1:]...)
		case "reject":
			q.events = append(q.events[:i], q.events[i+1:]...)
			s.deadLetters = append(s.deadLetters, DeadLetter{Topic: q.topic, Subscription: q.cfg.Name, Reason: "Rejected", DeliveryAttempts: h.count, Event: h.event})
		case "release":
			h.lockToken, h.availAt = "", now.Add(delay)
			if h.count >= q.cfg.MaxDeliveryCount {
				q.events = append(q.events[:i], q.events[i+1:]...)
				s.deadLetters = append(s.deadLetters, DeadLetter{Topic: q.topic, Subscription: q.cfg.Name, Reason: "MaxDeliveryCountExceeded", DeliveryAttempts: h.count, Event: h.event})
			}
		case "renewLock":
			h.lockedTil = now.Add(q.cfg.LockDuration)
		}
		res.Succeeded = append(res.Succeeded, tok)
	}
	s.cond.Broadcast()
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(res)
}
