package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"sandman/apperr"
	"sandman/applog"
)

// logLineJSON is a line of an app's output in the API. Its text is data, never markup: the
// answer is JSON (or an event stream's JSON), and no page renders it as HTML.
type logLineJSON struct {
	Seq       int64     `json:"seq"`
	At        time.Time `json:"at"`
	SandboxID uuid.UUID `json:"sandboxId"`
	Version   int32     `json:"version"`
	Source    string    `json:"source"`
	Stream    string    `json:"stream"`
	Text      string    `json:"text"`
}

func toLogLineJSON(l applog.LogLine) logLineJSON {
	return logLineJSON{Seq: l.Seq, At: l.At, SandboxID: l.SandboxID, Version: l.Version, Source: string(l.Source),
		Stream: string(l.Stream), Text: l.Text}
}

// cursorParam reads a non-negative sequence number from the query (0 when absent).
func cursorParam(c echo.Context, name string) (int64, error) {
	raw := c.QueryParam(name)
	if raw == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 0 {
		return 0, apperr.Invalid(map[string]string{name: "Send " + name + " as a number of 0 or more: the seq of the last line you have."})
	}
	return n, nil
}

// apiLogs is a page of the project's lines after the cursor, oldest first.
func (h *Handlers) apiLogs(c echo.Context) error {
	id, err := h.projectID(c)
	if err != nil {
		return err
	}
	after, err := cursorParam(c, "after")
	if err != nil {
		return err
	}
	limit := applog.MaxPage
	if raw := c.QueryParam("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 {
			return apperr.Invalid(map[string]string{"limit": fmt.Sprintf("Send limit as a positive number (at most %d lines are sent at once).", applog.MaxPage)})
		}
		limit = min(n, applog.MaxPage)
	}
	lines, err := h.AppLog.Lines(c.Request().Context(), principal(c).Founder.ID, id, after, limit)
	if err != nil {
		return err
	}
	out := make([]logLineJSON, len(lines))
	next := after
	for i, l := range lines {
		out[i] = toLogLineJSON(l)
		next = l.Seq
	}
	return c.JSON(http.StatusOK, map[string]any{"lines": out, "next": next})
}

// logStreamHeartbeat keeps a quiet log stream's connection (and the proxies on its way) open.
const logStreamHeartbeat = 15 * time.Second

// maxLogStreams is how many log streams a founder holds open on one instance.
const maxLogStreams = 20

// logStreams counts each founder's open log streams on this instance.
type logStreams struct {
	mu sync.Mutex
	n  map[uuid.UUID]int
}

func (s *logStreams) take(founder uuid.UUID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[uuid.UUID]int{}
	}
	if s.n[founder] >= maxLogStreams {
		return false
	}
	s.n[founder]++
	return true
}

func (s *logStreams) give(founder uuid.UUID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[founder]--; s.n[founder] <= 0 {
		delete(s.n, founder)
	}
}

// apiLogStream follows the project's lines as server-sent events: one "log" event per line,
// its id the line's seq, so a reconnection's Last-Event-ID (or ?after=) resumes after the last
// line received; with neither, it starts from the oldest line kept. Lines are read from the
// database after the cursor whenever the feed says the project got some, so a missed wake costs
// time, never a line. It is the one event stream an API token may open.
func (h *Handlers) apiLogStream(c echo.Context) error {
	id, err := h.projectID(c)
	if err != nil {
		return err
	}
	after, err := cursorParam(c, "after")
	if err != nil {
		return err
	}
	if raw := c.Request().Header.Get("Last-Event-ID"); raw != "" {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n < 0 {
			return echo.NewHTTPError(http.StatusBadRequest, "Last-Event-ID must be the seq of the last line received.")
		}
		after = n
	}
	ctx, founder := c.Request().Context(), principal(c).Founder.ID
	if err := h.AppLog.Owns(ctx, founder, id); err != nil {
		return err
	}
	if !h.logStreams.take(founder) {
		return &apperr.Error{Kind: apperr.KindRateLimited, Code: codeTooManyStreams, RetryAfter: time.Minute,
			Message: fmt.Sprintf("At most %d log streams may be open at once: close one you no longer read.", maxLogStreams)}
	}
	defer h.logStreams.give(founder)
	wake, stop := h.AppLog.Feed.Subscribe(id)
	defer stop()

	rc := http.NewResponseController(c.Response())
	_ = rc.SetReadDeadline(time.Time{}) // the request has been read; the stream lasts
	hd := c.Response().Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	c.Response().WriteHeader(http.StatusOK)
	w := c.Response()
	if _, err := io.WriteString(w, ": log stream\n\n"); err != nil {
		return nil
	}
	_ = rc.Flush()
	heartbeat := time.NewTicker(logStreamHeartbeat)
	defer heartbeat.Stop()
	var buf strings.Builder
	for {
		for { // everything after the cursor, a page at a time
			lines, err := h.AppLog.LinesAfter(ctx, id, after, applog.MaxPage)
			if err != nil {
				if ctx.Err() == nil {
					h.Logger.Warn("log stream: read lines", "project", id, "err", err)
				}
				return nil
			}
			if len(lines) == 0 {
				break
			}
			buf.Reset()
			for _, l := range lines {
				writeLogEvent(&buf, l)
				after = l.Seq
			}
			if _, err := io.WriteString(w, buf.String()); err != nil {
				return nil
			}
			if err := rc.Flush(); err != nil {
				return nil
			}
			if len(lines) < applog.MaxPage {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-h.AppLog.Feed.Done():
			return nil
		case <-heartbeat.C:
			if _, err := io.WriteString(w, ": heartbeat\n\n"); err != nil {
				return nil
			}
			if err := rc.Flush(); err != nil {
				return nil
			}
		case <-wake:
		}
	}
}

// writeLogEvent writes one line as a "log" event. Its data is one line of JSON: a line's own
// line breaks and carriage returns are escaped by the encoder, so no text can end the event or
// forge another.
func writeLogEvent(b *strings.Builder, l applog.LogLine) {
	data, _ := json.Marshal(toLogLineJSON(l))
	fmt.Fprintf(b, "id: %d\nevent: log\ndata: %s\n\n", l.Seq, data)
}

// problemJSON is a problem in the API; its text is data, never markup.
type problemJSON struct {
	ID        uuid.UUID `json:"id"`
	Source    string    `json:"source"`
	Message   string    `json:"message"`
	Detail    string    `json:"detail"`
	Version   int32     `json:"version"`
	Count     int64     `json:"count"`
	FirstSeen time.Time `json:"firstSeen"`
	LastSeen  time.Time `json:"lastSeen"`
	Open      bool      `json:"open"`
}

func (h *Handlers) apiProblems(c echo.Context) error {
	id, err := h.projectID(c)
	if err != nil {
		return err
	}
	problems, err := h.AppLog.Problems(c.Request().Context(), principal(c).Founder.ID, id)
	if err != nil {
		return err
	}
	out := make([]problemJSON, len(problems))
	for i, p := range problems {
		out[i] = problemJSON{ID: p.ID, Source: string(p.Source), Message: p.Message, Detail: p.Detail, Version: p.Version,
			Count: p.Count, FirstSeen: p.FirstSeen, LastSeen: p.LastSeen, Open: p.Open}
	}
	return c.JSON(http.StatusOK, map[string]any{"problems": out})
}

// reportError answers a report refused for what it is: 413 past its size, 400 for anything that
// is not one; other errors as they are.
func reportError(err error) error {
	switch {
	case errors.Is(err, applog.ErrReportTooLarge):
		return &apperr.Error{Kind: apperr.KindTooLarge, Code: codeTooLarge, Message: reportTooLarge}
	case errors.Is(err, applog.ErrNotAReport):
		return echo.NewHTTPError(http.StatusBadRequest, "This is not a report: send "+err.Error()+".")
	}
	return err
}

// apiReport is the founder's page relaying an error its preview's page saw (docs/architecture.md,
// "The browser's reports").
func (h *Handlers) apiReport(c echo.Context) error {
	id, err := parseID(c.Param("id"), "Preview")
	if err != nil {
		return err
	}
	body, err := io.ReadAll(c.Request().Body) // bounded by its route's rule (limitBody)
	if err != nil {
		return err
	}
	if _, err := h.AppLog.ReportBrowser(c.Request().Context(), principal(c).Founder.ID, id, body); err != nil {
		return reportError(err)
	}
	return c.NoContent(http.StatusNoContent)
}

// shareReport is a share link visitor's page relaying an error the preview's page saw.
func (h *Handlers) shareReport(c echo.Context) error {
	body, err := io.ReadAll(c.Request().Body) // bounded by its route's rule (limitBody)
	if err != nil {
		return err
	}
	if _, err := h.AppLog.ReportShared(c.Request().Context(), visitOf(c).ProjectID, c.RealIP(), body); err != nil {
		return reportError(err)
	}
	return c.NoContent(http.StatusNoContent)
}
