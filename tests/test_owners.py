"""The CODEOWNERS-like owner map: parsing, CODEOWNERS matching rules, owners of a change."""

from __future__ import annotations

import pytest

from fastci.shared.owners import OwnerFileError, owners_of_change, owners_of_path, parse_owner_file

OWNERS = """
# default first, so every other rule overrides it
*                        @framework-team
/fastlm/compiler/        @compiler-team
*.cu                     @kernels-team
/fastlm/**/attention*    @attention-team @kernels-team
docs/                    @docs
layer:driver             @driver-team
layer:firmware           @firmware-team
"""


@pytest.fixture
def owner_map():
    return parse_owner_file(OWNERS, repo="acme/llm-framework")


@pytest.mark.parametrize(
    "path,teams",
    [
        ("fastlm/compiler/lower.py", ("compiler-team",)),
        ("fastlm/compiler/passes/fuse.py", ("compiler-team",)),
        ("other/fastlm/compiler/x.py", ("framework-team",)),  # anchored at the root
        ("fastlm/kernels/gemm.cu", ("kernels-team",)),  # name pattern matches at any depth
        ("fastlm/ops/nn/attention_fwd.py", ("attention-team", "kernels-team")),
        ("src/docs/index.md", ("docs",)),  # unanchored directory
        ("README.md", ("framework-team",)),
    ],
)
def test_last_matching_rule_wins(owner_map, path, teams):
    assert owners_of_path(path, owner_map) == teams


def test_owner_of_a_change_is_the_team_with_most_files_then_layers(owner_map):
    paths = ["fastlm/compiler/a.py", "fastlm/compiler/b.py", "fastlm/kernels/k.cu"]
    assert owners_of_change(paths, ["compiler"], owner_map) == ("compiler-team", "kernels-team")
    assert owners_of_change([], ["driver"], owner_map) == ("driver-team",)
    assert owners_of_change([], ["model"], owner_map) == ()


def test_version_is_a_digest_of_the_rules(owner_map):
    again = parse_owner_file(OWNERS + "\n# a comment changes nothing\n", repo="acme/llm-framework")
    assert again.version == owner_map.version and again.id == owner_map.id
    assert parse_owner_file(OWNERS + "*.md @docs\n", repo="acme/llm-framework").version != owner_map.version


@pytest.mark.parametrize(
    "text,message",
    [("/src/\n", "line 1: '/src/' names no owner"), ("layer:gpu @x\n", "unknown layer 'gpu'")],
)
def test_bad_lines_are_refused_by_line(text, message):
    with pytest.raises(OwnerFileError, match=message):
        parse_owner_file(text, repo="r")
