// Package docs holds the repository's reference pages; its tests keep their links and the README's
// front-door promises true.
package docs

import (
	"bytes"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"

	"github.com/dovetail-dev/dovetail/shared/telemetry"
)

// root is the repository root, seen from this package's directory.
const root = ".."

// markdown parses as GitHub renders (CommonMark with GFM tables, so links inside table cells are
// links).
var markdown = goldmark.New(goldmark.WithExtensions(extension.GFM))

// page is one Markdown file: its relative links and the anchors its headings get.
type page struct {
	links   []string
	anchors map[string]bool
}

func parse(t *testing.T, path string) page {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := markdown.Parser().Parse(text.NewReader(src))
	p := page{anchors: map[string]bool{}}
	seen := map[string]int{}
	err = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Link:
			p.links = append(p.links, string(n.Destination))
		case *ast.Image:
			p.links = append(p.links, string(n.Destination))
		case *ast.Heading:
			slug := githubSlug(string(n.Text(src)))
			if k := seen[slug]; k > 0 {
				p.anchors[fmt.Sprintf("%s-%d", slug, k)] = true
			} else {
				p.anchors[slug] = true
			}
			seen[slug]++
		}
		return ast.WalkContinue, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// githubSlug is the anchor GitHub gives a heading: its text lower-cased, every character that is
// not a letter, mark, digit, connector, hyphen or space dropped, spaces turned into hyphens; a
// repeated slug gets "-1", "-2", ... (parse adds those). The rule of html-pipeline's
// TableOfContentsFilter (PUNCTUATION_REGEXP = /[^\p{Word}\- ]/u, then tr(' ', '-')), which
// GitHub's Markdown rendering uses.
func githubSlug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || unicode.IsLetter(r) || unicode.IsMark(r) || unicode.Is(unicode.Nd, r) || unicode.Is(unicode.Pc, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestGithubSlug(t *testing.T) {
	// Expected anchors worked by hand from the rule above.
	for heading, want := range map[string]string{
		"NATS: authentication, TLS and roles":                               "nats-authentication-tls-and-roles",
		"Try it on your cluster: dovetail plan over a live cluster's state": "try-it-on-your-cluster-dovetail-plan-over-a-live-clusters-state",
		"Upgrading: NodeClaims created before the ownership mark":           "upgrading-nodeclaims-created-before-the-ownership-mark",
		"make run: the first build and what it shows":                       "make-run-the-first-build-and-what-it-shows",
		"2026-12-06: one_word – spaced":                                     "2026-12-06-one_word--spaced",
	} {
		if got := githubSlug(heading); got != want {
			t.Errorf("githubSlug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// markdownFiles lists every Markdown file of the repository, leaving out hidden folders (.git,
// .cache) and build output.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || slices.Contains([]string{"node_modules", "bin", "dist", "build"}, d.Name())) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// Every relative link of every Markdown file names a file or folder that exists, inside the
// repository, and an anchor names a heading of its page.
func TestRelativeLinksResolve(t *testing.T) {
	files := markdownFiles(t)
	if len(files) < 10 {
		t.Fatalf("found %d Markdown files under %s, want the repository's", len(files), root)
	}
	absRoot, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	pages := map[string]page{}
	get := func(path string) page {
		if p, ok := pages[path]; ok {
			return p
		}
		p := parse(t, path)
		pages[path] = p
		return p
	}
	checked := 0
	for _, file := range files {
		for _, link := range get(file).links {
			u, err := url.Parse(link)
			if err != nil {
				t.Errorf("%s: link %q: %v", file, link, err)
				continue
			}
			if u.Scheme != "" || u.Host != "" {
				continue // an absolute URL: no network in tests
			}
			target := file
			if u.Path != "" {
				if strings.HasPrefix(u.Path, "/") {
					t.Errorf("%s: link %q is absolute; GitHub reads it from the host's root, not the repository's", file, link)
					continue
				}
				target = filepath.Join(filepath.Dir(file), filepath.FromSlash(u.Path))
				abs, err := filepath.Abs(target)
				if err != nil || (abs != absRoot && !strings.HasPrefix(abs, absRoot+string(filepath.Separator))) {
					t.Errorf("%s: link %q leaves the repository", file, link)
					continue
				}
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s: link %q: %s does not exist", file, link, target)
					continue
				}
			}
			checked++
			if u.Fragment == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				t.Errorf("%s: link %q: an anchor into a file that is not Markdown", file, link)
				continue
			}
			if !get(target).anchors[u.Fragment] {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s", file, link, target, u.Fragment)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link checked")
	}
}

// The README is the front door: at most 150 lines, its first commands the two that start local
// dev and run the tests, both real make targets, and CI runs the same test command; every page
// of docs/ is linked from it.
func TestREADMEFrontDoor(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(readme, []byte("\n")); n > 150 {
		t.Errorf("README.md has %d lines, want at most 150 (reference prose goes to docs/)", n)
	}
	block := regexp.MustCompile("(?s)```sh\n(.*?)```").FindSubmatch(readme)
	if block == nil {
		t.Fatal("README.md has no ```sh block")
	}
	var commands []string
	for _, line := range strings.Split(strings.TrimSpace(string(block[1])), "\n") {
		commands = append(commands, strings.TrimSpace(strings.SplitN(line, "#", 2)[0]))
	}
	if want := []string{"make run", "make test"}; !slices.Equal(commands, want) {
		t.Errorf("README.md's first commands are %q, want %q", commands, want)
	}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"run", "test"} {
		if !regexp.MustCompile(`(?m)^` + target + `:`).Match(makefile) {
			t.Errorf("Makefile has no target %q, which README.md tells a newcomer to run", target)
		}
	}
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^make test$`).Match(ci) {
		t.Error(".ci/run does not run `make test`, the test command README.md gives")
	}
	first := strings.SplitN(string(readme), "\n\n", 3)[1]
	if strings.Contains(first, "planned") {
		t.Errorf("README.md's first paragraph calls something planned:\n%s", first)
	}
	linked := map[string]bool{}
	for _, link := range parse(t, filepath.Join(root, "README.md")).links {
		linked[strings.SplitN(link, "#", 2)[0]] = true
	}
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		if !linked["docs/"+p] {
			t.Errorf("README.md does not link docs/%s", p)
		}
	}
}

// Every metric Dovetail defines (telemetry.All) has its row in docs/metrics.md's table, naming
// each of its labels.
func TestMetricsTableListsEveryMetric(t *testing.T) {
	page, err := os.ReadFile("metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(page), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		for _, name := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(cells[1], -1) {
			rows[name[1]] = cells[2]
		}
	}
	for _, m := range telemetry.All {
		labels, ok := rows[m.Name]
		if !ok {
			t.Errorf("docs/metrics.md has no row for %s", m.Name)
			continue
		}
		for _, l := range m.Labels {
			if !regexp.MustCompile(`\b` + regexp.QuoteMeta(l) + `\b`).MatchString(labels) {
				t.Errorf("docs/metrics.md's row for %s does not name its label %q (labels cell: %q)", m.Name, l, labels)
			}
		}
	}
	var extra []string
	for name := range rows {
		if !slices.ContainsFunc(telemetry.All, func(m *telemetry.Metric) bool { return m.Name == name }) {
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		t.Errorf("docs/metrics.md lists metrics Dovetail does not define: %v", extra)
	}
}
