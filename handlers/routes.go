package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"sandman/static"
)

// routes is the one route table.
func (h *Handlers) routes(e *echo.Echo) {
	e.Use(middleware.Recover())
	e.Use(h.requestLog)
	e.Use(middleware.SecureWithConfig(middleware.SecureConfig{
		XSSProtection:         "0",
		ContentTypeNosniff:    "nosniff",
		XFrameOptions:         "DENY",
		ReferrerPolicy:        "same-origin",
		ContentSecurityPolicy: h.contentSecurityPolicy(),
	}))
	// Browsers' own cross-origin signal (Sec-Fetch-Site/Origin), under the session token check.
	e.Use(echo.WrapMiddleware(http.NewCrossOriginProtection().Handler))

	e.GET("/healthz", h.healthz)
	e.GET("/readyz", h.readyz)
	e.GET("/metrics", h.metrics())
	e.GET("/static/*", echo.WrapHandler(http.StripPrefix("/static/", staticHandler(static.Files))))

	s := e.Group("", echo.WrapMiddleware(h.Sessions.LoadAndSave), h.loadUser, h.csrf)
	s.GET("/login", h.loginPage)
	s.POST("/login", h.loginSubmit)
	s.GET("/signup", h.signupPage)
	s.POST("/signup", h.signupSubmit)
	s.POST("/logout", h.logoutSubmit)

	app := s.Group("", h.requireUser)
	app.GET("/", h.dashboard)
	app.GET("/projects/new", h.newProjectPage)
	app.POST("/projects", h.createFromStarter)
	app.POST("/projects/upload", h.createFromUpload)
	app.GET("/projects/:id", h.projectPage)

	s.POST("/api/users", h.apiSignUp)
	s.POST("/api/session", h.apiLogIn)
	api := s.Group("/api", h.requireUser)
	api.DELETE("/session", h.apiLogOut)
	api.GET("/me", h.apiMe)
	api.GET("/projects", h.apiListProjects)
	api.POST("/projects", h.apiCreateProject)
}
