package handlers

import (
	"context"
	"mime/multipart"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"sandman/accounts"
	"sandman/shares"
)

// requestState is what the middlewares learn of a request for those after them and its handler.
// It lives in the request's context under a key of an unexported type, so nothing outside this
// package can read or write it, and nothing inside reaches it by a string (echo's c.Set and
// c.Get): each field is written by the middleware named beside it and read through the function
// next to that middleware (principal, answersOf, visitOf, …). It is one value, put in the context
// once per request by withRequestState, so a middleware that learns something costs no more.
type requestState struct {
	answers      answers             // answerAs: how the route answers (answersOf)
	streamed     bool                // limitBody: the body is a streamed form
	largeBody    *largeBodyState     // limitBody: a large body held back until largeBody lifts it
	session      bool                // loadUser: the session was loaded (hasSession)
	principal    *accounts.Principal // loadUser or bearer: who the request acts for (principal)
	refusedToken uuid.UUID           // bearer: the token refused, for the log (loggedToken)
	preLogin     string              // preLoginToken: the visitor's pre-login CSRF token
	form         *multipart.Reader   // firstFormField: the streamed form, after its first field
	credits      int32               // loadUser or the page itself: the founder's balance (pageCredits)
	creditsRead  bool                // credits holds the balance read for this request
	ownBalance   bool                // ownBalance: the page reads the balance itself
	visit        shares.Visit        // visitorLink: the share link the visitor opened (visitOf)
}

type requestStateKey struct{}

// withRequestState puts the request's state in its context before anything else runs (an e.Pre
// middleware: routing and every other middleware come after), so that no middleware holds a
// request made before it.
func withRequestState(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		stateOf(c)
		return next(c)
	}
}

// stateOf is the request's state. One made here, for a request withRequestState did not see
// (a test's own echo), is put in the context as it would have done.
func stateOf(c echo.Context) *requestState {
	r := c.Request()
	if s, ok := r.Context().Value(requestStateKey{}).(*requestState); ok {
		return s
	}
	s := &requestState{}
	c.SetRequest(r.WithContext(context.WithValue(r.Context(), requestStateKey{}, s)))
	return s
}
