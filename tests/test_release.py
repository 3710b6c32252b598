"""A citable release: CITATION.cff follows the Citation File Format 1.2.0, .zenodo.json has
what a Zenodo deposit needs, and the version is one everywhere: pyproject.toml,
neurd.__version__, CITATION.cff, .zenodo.json, CHANGELOG.md and every run's provenance."""

import datetime
import json
import re
import tomllib
from pathlib import Path

import jsonschema
import pytest
import yaml

import neurd
from neurd import provenance

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
VERSION = PROJECT["version"]
PAPER_ARXIV = "arXiv:1906.00190"

# The rules of the Citation File Format 1.2.0 (citation-file-format.github.io) that bear on
# this file, as a JSON schema: the required keys, the closed sets of values, the shapes of
# persons, entities, references and identifiers, and no key outside the format.
_DATE = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"}
_PERSON = {"type": "object", "additionalProperties": False, "minProperties": 1,
           "properties": {k: {"type": "string", "minLength": 1} for k in (
               "family-names", "given-names", "name-particle", "name-suffix", "affiliation",
               "email", "orcid", "website", "alias")}}
_ENTITY = {"type": "object", "additionalProperties": False, "required": ["name"],
           "properties": {k: {"type": "string", "minLength": 1} for k in (
               "name", "address", "city", "country", "email", "website", "orcid")}}
_AUTHORS = {"type": "array", "minItems": 1, "items": {"anyOf": [_ENTITY, _PERSON]}}
_IDENTIFIER = {"type": "object", "additionalProperties": False, "required": ["type", "value"],
               "properties": {"type": {"enum": ["doi", "url", "swh", "other"]},
                              "value": {"type": "string", "minLength": 1},
                              "description": {"type": "string"}}}
_REFERENCE = {
    "type": "object", "additionalProperties": False, "required": ["type", "title", "authors"],
    "properties": {
        "type": {"enum": ["article", "book", "conference-paper", "proceedings", "report",
                          "software", "thesis", "unpublished", "generic"]},
        "title": {"type": "string", "minLength": 1}, "authors": _AUTHORS,
        "year": {"type": "integer"}, "collection-title": {"type": "string"},
        "conference": _ENTITY, "identifiers": {"type": "array", "items": _IDENTIFIER},
        "url": {"type": "string", "pattern": r"^https://"}, "doi": {"type": "string"},
        "pages": {"type": "string"}}}
CFF_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "required": ["cff-version", "message", "title", "authors"],
    "properties": {
        "cff-version": {"const": "1.2.0"}, "message": {"type": "string", "minLength": 1},
        "type": {"enum": ["software", "dataset"]}, "title": {"type": "string", "minLength": 1},
        "abstract": {"type": "string"}, "authors": _AUTHORS,
        "version": {"type": "string"}, "date-released": _DATE,
        "license": {"type": "string"}, "keywords": {"type": "array",
                                                    "items": {"type": "string"}},
        "repository-code": {"type": "string", "pattern": r"^https://"},
        "url": {"type": "string", "pattern": r"^https://"},
        "doi": {"type": "string", "pattern": r"^10\.\d{4,9}/\S+$"},
        "identifiers": {"type": "array", "items": _IDENTIFIER},
        "preferred-citation": _REFERENCE,
        "references": {"type": "array", "items": _REFERENCE}}}


@pytest.fixture(scope="module")
def citation():
    return yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))


def test_citation_cff_follows_the_format(citation):
    jsonschema.validate(citation, CFF_SCHEMA)
    datetime.date.fromisoformat(citation["date-released"])


@pytest.mark.parametrize("bad", [
    {"cff-version": "1.1.0"}, {"type": "paper"}, {"authors": []},
    {"authors": [{"name": "x", "given-names": "y"}]}, {"date-released": "27 Nov 2026"},
    {"title": None}, {"repository": "x"},
])
def test_the_schema_check_refuses_what_the_format_does(citation, bad):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**citation, **bad}, CFF_SCHEMA)


def test_the_citation_names_this_software_and_the_paper_it_reproduces(citation):
    assert citation["type"] == "software" and citation["version"] == VERSION
    assert citation["license"] == PROJECT["license"]
    assert [a["name"] for a in citation["authors"]] == [a["name"] for a in PROJECT["authors"]]
    (paper,) = citation["references"]
    assert paper["title"].startswith("Neural Replicator Dynamics")
    assert paper["year"] == 2020 and "AAMAS" in paper["conference"]["name"]
    assert [a["family-names"] for a in paper["authors"]][:3] == ["Hennes", "Morrill",
                                                                 "Omidshafiei"]
    assert len(paper["authors"]) == 11
    assert {i["value"] for i in paper["identifiers"]} == {PAPER_ARXIV}


def test_zenodo_metadata_is_ready_for_a_deposit(citation):
    record = json.loads((ROOT / ".zenodo.json").read_text(encoding="utf-8"))
    for key in ("title", "description", "upload_type", "version", "creators", "license",
                "access_right", "keywords", "related_identifiers"):
        assert record.get(key), f".zenodo.json lacks {key}"
    assert record["upload_type"] == "software" and record["access_right"] == "open"
    assert record["title"] == citation["title"] and record["version"] == VERSION
    assert record["license"] == PROJECT["license"]
    assert record["publication_date"] == citation["date-released"]
    assert all(isinstance(c.get("name"), str) and c["name"] for c in record["creators"])
    assert [c["name"] for c in record["creators"]] == [a["name"] for a in citation["authors"]]
    (paper,) = record["related_identifiers"]
    assert paper == {"identifier": PAPER_ARXIV, "relation": "references", "scheme": "arxiv",
                     "resource_type": "publication-conferencepaper"}
    assert set(record["keywords"]) == set(citation["keywords"])


def test_the_changelog_has_an_entry_for_this_release_in_keep_a_changelog_form(citation):
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$", text, re.M)
    assert releases and releases[0] == (VERSION, citation["date-released"])
    assert "## [Unreleased]" in text and "### Added" in text


def test_the_package_and_its_provenance_name_the_release():
    assert neurd.__version__ == VERSION  # from the installed metadata: `make` reinstalls
    record = provenance.collect({"scale": "default", "seed": 0})
    assert record["version"] == VERSION and record["packages"]["neurd"] == VERSION


def test_pyproject_names_its_authors_and_classifiers():
    assert PROJECT["authors"] == [{"name": "The neurd-repro contributors"}]
    assert "Programming Language :: Python :: 3.11" in PROJECT["classifiers"]
    assert not any(c.startswith("License ::") for c in PROJECT["classifiers"])  # SPDX field
