package handlers_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"sandman/app/apptest"
)

// The build page's environment variables in Chromium without JavaScript: a founder adds a
// secret and a plain variable with the page's forms, sees the plain one's value and the
// secret's name, "secret" and "not used by any file", never the secret's value, replaces the
// secret, is told why a refused name is refused next to its field, and deletes a variable.
// axe-core finds nothing serious and nothing scrolls sideways at 390 px.
func TestBrowserEnvironmentVariablesWithoutJavaScript(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	c := s.NewClient(t)
	c.SignUp("env-page@example.com")
	pid := newCounter(t, c)
	b, _ := s.Browse(t, "env-page@example.com")
	tab := b.OpenWithoutJavaScript(t, s.URL()+"/projects/"+pid)
	tab.WaitFor(t, "the section", `!!document.querySelector("[data-testid=env-none]")`)

	const secret = "sk-page-secret-7f6e5d4c"
	add := func(name, value string, isSecret bool) {
		t.Helper()
		tab.Do(t, chromedp.SendKeys(chromedp.ID("env-name"), name), chromedp.SendKeys(chromedp.ID("env-value"), value))
		if isSecret {
			tab.Do(t, chromedp.Click(chromedp.CSS("[data-testid=env-is-secret]")))
		}
		tab.Do(t, chromedp.Click(chromedp.CSS("[data-testid=env-add]")))
	}
	add("OPENAI_API_KEY", secret, true)
	tab.WaitFor(t, "the secret listed", `!!document.querySelector("[data-testid=env-var-OPENAI_API_KEY] [data-testid=env-secret]")`)
	add("DEBUG", "1", false)
	tab.WaitFor(t, "the plain one listed", textIs("[data-testid=env-var-DEBUG] [data-testid=env-value]", "1"))
	if !strings.Contains(textOfTab(t, tab, "[data-testid=env-var-OPENAI_API_KEY]"), "not used by any file") {
		t.Error("the secret no file mentions is not said to be unused")
	}
	if html := pageHTML(t, tab); strings.Contains(html, secret) {
		t.Fatal("the page shows the secret's value")
	}
	tab.ScriptsBack(t) // for axe-core: the page stays as drawn without JavaScript
	checkForEveryone(t, tab, "env-listed-no-js", `!!document.querySelector("[data-testid=env-var-DEBUG]")`)

	// Replace the secret: it stays a secret, its new value shown nowhere either.
	tab = b.OpenWithoutJavaScript(t, s.URL()+"/projects/"+pid)
	tab.WaitFor(t, "the page", `!!document.querySelector("[data-testid=env-var-OPENAI_API_KEY]")`)
	apptest.Eval[bool](t, tab, `(document.body.dataset.before = "1", true)`) // the next page lacks it
	tab.Do(t, chromedp.SendKeys(chromedp.ID("env-replace-OPENAI_API_KEY"), "sk-replaced-value-123"),
		chromedp.Click(chromedp.CSS("[data-testid=env-var-OPENAI_API_KEY] [data-testid=env-replace]")))
	tab.WaitFor(t, "the page again", `!document.body.dataset.before && !!document.querySelector("[data-testid=env-var-OPENAI_API_KEY] [data-testid=env-secret]")`)
	if html := pageHTML(t, tab); strings.Contains(html, "sk-replaced-value-123") {
		t.Fatal("the page shows the replaced secret's value")
	}

	// A refused name is said next to its field, and nothing is stored.
	add("PORT", "8080", false)
	tab.WaitFor(t, "the name's error", `!!document.querySelector("[data-testid=err-name]")`)
	if got := textOfTab(t, tab, "[data-testid=err-name]"); !strings.Contains(got, "PORT is set by Sandman") {
		t.Errorf("the error reads %q", got)
	}
	tab.ScriptsBack(t)
	checkForEveryone(t, tab, "env-refused-no-js", `!!document.querySelector("[data-testid=err-name]")`)

	tab = b.OpenWithoutJavaScript(t, s.URL()+"/projects/"+pid)
	tab.Do(t, chromedp.Click(chromedp.CSS("[data-testid=env-var-DEBUG] [data-testid=env-delete]")))
	tab.WaitFor(t, "DEBUG deleted", `!document.querySelector("[data-testid=env-var-DEBUG]") && !!document.querySelector("[data-testid=env-var-OPENAI_API_KEY]")`)
}

// textOfTab is the text of the element the selector finds, "" for none.
func textOfTab(t *testing.T, tab *apptest.Tab, selector string) string {
	t.Helper()
	return apptest.Eval[string](t, tab, `document.querySelector(`+jsString(selector)+`)?.textContent ?? ""`)
}

// pageHTML is the page as drawn, its form fields' values included.
func pageHTML(t *testing.T, tab *apptest.Tab) string {
	t.Helper()
	return apptest.Eval[string](t, tab, `document.documentElement.outerHTML + [...document.querySelectorAll("input")].map(i => i.value).join(" ")`)
}
