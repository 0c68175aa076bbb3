package userdata

import (
	"errors"
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// script builds a bash script in which every value is one quoted word: no value is ever spliced
// into the script's text, so none can close a quote, start a command or expand. The only
// unquoted text is what raw is given: the shebang and the NodeClass's own userData, which is a
// script by contract and runs as written.
type script struct {
	b strings.Builder
}

// shellQuote returns s as one single-quoted bash word: inside single quotes every byte but the
// quote itself is literal (bash manual, 3.1.2.2 Single Quotes; POSIX Shell Command Language
// 2.2.2), so a quote is written as '\” (close, escaped quote, reopen), and a carriage return
// as '$'\r” (below). mvdan.cc/sh's
// syntax.Quote is not used: it writes non-printable characters as $'\uXXXX', which bash
// decodes by the locale it runs in (under LANG=C, U+00AD stays the six characters \u00AD;
// found by TestPropertyShellQuotingAgainstBash). Errors: a NUL byte, which no bash argument
// can carry (argv entries are C strings).
func shellQuote(s string) (string, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return "", errors.New("a NUL byte cannot be passed to a command")
	}
	q := "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	// A carriage return is written outside the quotes as $'\r' (ANSI-C quoting; \r does not
	// depend on the locale): a CR inside quotes survives bash but not every reader of the
	// script, since tools fold CRLF line endings (mvdan.cc/sh's parser does).
	return strings.ReplaceAll(q, "\r", `'$'\r''`), nil
}

// raw appends text as it is, followed by a newline.
func (s *script) raw(text string) {
	s.b.WriteString(text)
	if !strings.HasSuffix(text, "\n") {
		s.b.WriteByte('\n')
	}
}

// command appends one simple command: argv[0] and its arguments, each quoted as one word.
// Errors: a value bash cannot carry (a NUL byte; argv entries are C strings), naming its
// position.
func (s *script) command(argv ...string) error {
	words := make([]string, len(argv))
	for i, a := range argv {
		q, err := shellQuote(a)
		if err != nil {
			return fmt.Errorf("word %d of %s: %w", i, argv[0], err)
		}
		words[i] = q
	}
	s.b.WriteString(strings.Join(words, " "))
	s.b.WriteByte('\n')
	return nil
}

func (s *script) String() string { return s.b.String() }

// commandArgs finds the first simple command named name in a bash script and returns its
// arguments as bash passes them (quotes removed, escapes applied), parsing the script with
// mvdan.cc/sh's bash parser. An argument whose value bash would only know at run time (a
// parameter, command or arithmetic expansion, a glob) is an error: the fake cannot run it, and
// Dovetail never renders one.
func commandArgs(src, name string) ([]string, error) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "user-data")
	if err != nil {
		return nil, fmt.Errorf("not a bash script: %w", err)
	}
	var call *syntax.CallExpr
	syntax.Walk(f, func(n syntax.Node) bool {
		if c, ok := n.(*syntax.CallExpr); ok && call == nil && len(c.Args) > 0 {
			if w, err := literalWord(c.Args[0]); err == nil && w == name {
				call = c
			}
		}
		return call == nil
	})
	if call == nil {
		return nil, fmt.Errorf("no %s call", name)
	}
	args := make([]string, 0, len(call.Args)-1)
	for i, w := range call.Args[1:] {
		a, err := literalWord(w)
		if err != nil {
			return nil, fmt.Errorf("argument %d of %s: %w", i+1, name, err)
		}
		args = append(args, a)
	}
	return args, nil
}

// literalWord is the value of a word made only of literal text and quotes.
func literalWord(w *syntax.Word) (string, error) {
	var bad syntax.Node
	syntax.Walk(w, func(n syntax.Node) bool {
		switch n.(type) {
		case *syntax.ParamExp, *syntax.CmdSubst, *syntax.ArithmExp, *syntax.ProcSubst, *syntax.ExtGlob, *syntax.BraceExp:
			if bad == nil {
				bad = n
			}
		}
		return bad == nil
	})
	if bad != nil {
		return "", errors.New("expands at run time: " + strings.TrimSpace(wordText(w)))
	}
	// Quote removal as bash does it; globbing is off (no ReadDir), so a word is one field.
	fields, err := expand.Fields(&expand.Config{}, w)
	if err != nil {
		return "", err
	}
	if len(fields) != 1 {
		return "", fmt.Errorf("%d fields, want one: %s", len(fields), strings.TrimSpace(wordText(w)))
	}
	return fields[0], nil
}

func wordText(w *syntax.Word) string {
	var b strings.Builder
	_ = syntax.NewPrinter().Print(&b, w)
	return b.String()
}
