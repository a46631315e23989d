// JSON Schema -> Grammar: the grammar of compact-ish JSON texts that validate against a schema, for
// OpenAI's response_format {type: "json_schema"} and {type: "json_object"}.
//
// Supported: type (one or a list), properties, required, additionalProperties, enum, const, items,
// minItems/maxItems, minLength/maxLength (code points), minimum/maximum/exclusiveMinimum/
// exclusiveMaximum, anyOf/oneOf (as alternatives), allOf with one schema, $ref to local pointers
// ("#", "#/$defs/...", "#/definitions/...", recursion allowed), and boolean schemas. Annotations
// (title, description, default, examples, format, ...) and unknown keywords are ignored; `format` is
// not checked. Keywords that would change validity and are not supported (pattern, not,
// if/then/else, uniqueItems, multipleOf, prefixItems, ...) are refused with an error that names the
// keyword and where it is.
//
// Choices (the output validates either way):
// - Properties come in the schema's order; optional ones may be left out.
// - additionalProperties absent: with `properties`, only the listed properties (OpenAI strict style);
//   without `properties`, any properties. true or a schema: extra properties after the listed ones,
//   under keys that are not listed.
// - A schema without `type` takes the type its keywords imply (properties -> object, items -> array,
//   minLength -> string), else any JSON value.
// - Integers have at most 15 digits and numbers at most 15 integer and 15 fraction digits and a
//   2-digit exponent, so every output parses to a finite double (and an integer stays an integer).
// - Bounds: integers get exactly the integers in range. Numbers get a sound subset: in-range integer
//   parts, with a fraction only where the whole unit interval fits (under maximum 5, 4.5 but not
//   5.0; under minimum -2.5, -1.5 but not -2.5), and no exponent; bounds less than one apart with no
//   integer between them are refused.
// - oneOf is treated as anyOf: with overlapping branches an output may match more than one.
// - Strings never contain \u escapes of surrogates (any character can be written raw in UTF-8).
// - Whitespace between tokens: none, one space, or one newline followed by at most max_indent spaces.
#pragma once

#include <memory>
#include <string_view>

#include "base/status.h"
#include "sampling/grammar.h"

namespace gemlet {

struct JsonGrammarOptions {
  bool whitespace = true;  // false: compact JSON only
  int max_indent = 16;     // spaces after a newline between tokens
};

// A JSON Schema given as JSON text. Errors: malformed JSON, an unsupported keyword (named), a bad
// keyword value, an unresolvable $ref, a schema no finite value satisfies.
Result<Grammar> CompileJsonSchema(std::string_view schema_json, const JsonGrammarOptions& options = {});
// Any JSON object (response_format {type: "json_object"}).
Grammar JsonObjectGrammar(const JsonGrammarOptions& options = {});
// An OpenAI response_format object as JSON text: {"type": "text"} gives nullptr (no constraint),
// {"type": "json_object"} any object, {"type": "json_schema", "json_schema": {"schema": {...}}} the schema.
Result<std::shared_ptr<const Grammar>> GrammarForResponseFormat(std::string_view response_format_json,
                                                                const JsonGrammarOptions& options = {});

}  // namespace gemlet
