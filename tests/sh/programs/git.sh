#!/usr/bin/env bash
# Real programs, git: init, add with a .gitignore that must be honoured,
# commit, status, gc and fsck in the directory; clone out of it, into it and
# within it (local clones hard-link the object files).  Each check runs on a
# plain directory and on the mount with the same expected result (lib.sh
# rp_*).  git runs with its own empty HOME and no system config.
. "$(dirname "$0")/../lib.sh"
command -v git >/dev/null || skip "git is missing (run scripts/install-deps.sh)"
export HOME="$BFS_TMP/home" GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=boundfs GIT_AUTHOR_EMAIL=t@boundfs.invalid \
    GIT_COMMITTER_NAME=boundfs GIT_COMMITTER_EMAIL=t@boundfs.invalid
mkdir -p "$HOME"
git config --global init.defaultBranch main

bfs_mount max_size=1G

# make_repo DIR: a repository with ignored files, two commits; checks what
# git add took and what status says at each step
make_repo() {
    git init -q "$1"; cd "$1"
    printf '*.log\nbuild/\n!keep.log\n' > .gitignore
    mkdir -p src build bin
    echo 'int main(void) { return 0; }' > src/main.c
    echo readme > README; echo noise > run.log; echo kept > keep.log
    echo obj > build/out.o; printf '#!/bin/sh\necho tool\n' > bin/tool; chmod 755 bin/tool
    ln -s README link
    git add -A
    rp_want ".gitignore README bin/tool keep.log link src/main.c" "$(git ls-files | tr '\n' ' ' | sed 's/ $//')" "git add -A honours .gitignore"
    rp_want "!! build/|!! run.log" "$(git status --porcelain --ignored | grep '^!!' | tr '\n' '|' | sed 's/|$//')" "status lists the ignored files"
    git commit -qm first
    rp_want "" "$(git status --porcelain)" "status is clean after the commit"
    echo more >> README
    rp_want " M README" "$(git status --porcelain)" "status sees the change"
    git commit -qam second
    rp_want "" "$(git status --porcelain)" "status is clean after the second commit"
    rp_want 100755 "$(git ls-files -s bin/tool | cut -d' ' -f1)" "the executable bit is recorded"
}
# check_clone DIR: a clone is complete, intact and clean
check_clone() {
    rp_want 2 "$(git -C "$1" rev-list --count HEAD)" "commits in the clone of $1"
    git -C "$1" fsck --strict --no-progress
    rp_want "" "$(git -C "$1" status --porcelain)" "a fresh clone is clean"
    rp_want "readme|more" "$(tr '\n' '|' < "$1/README" | sed 's/|$//')" "checked-out README"
    rp_want "$(printf '#!/bin/sh\necho tool')" "$("$1/bin/tool" >/dev/null && cat "$1/bin/tool")" "checked-out executable runs"
}
git_repo() { make_repo "$1/repo"; }
git_gc() {
    make_repo "$1/repo"
    git gc -q
    rp_want "count: 0" "$(git count-objects -v | grep '^count:')" "no loose objects after gc"
    rp_want "packs: 1" "$(git count-objects -v | grep '^packs:')" "one pack after gc"
    git fsck --strict --no-progress
    git repack -adq; git prune
    rp_want "" "$(git status --porcelain)" "status clean after repack and prune"
}
git_clone_out()    { make_repo "$1/repo"; git clone -q "$1/repo" "$2/clone"; check_clone "$2/clone"; }
git_clone_in()     { make_repo "$2/repo"; git clone -q "$2/repo" "$1/clone"; check_clone "$1/clone"; }
git_clone_within() { make_repo "$1/repo"; git clone -q "$1/repo" "$1/clone"; check_clone "$1/clone"; }
# a bare repository in the directory: push to it, clone from it
git_bare_push() {
    make_repo "$2/work"
    git init -q --bare "$1/bare.git"
    git -C "$2/work" push -q "$1/bare.git" main
    git clone -q "$1/bare.git" "$2/clone"; check_clone "$2/clone"
}
export -f make_repo check_clone

rp_check git-add-commit git_repo
rp_check git-gc git_gc
rp_check git-clone-out git_clone_out
rp_check git-clone-in git_clone_in
rp_check git-clone-within git_clone_within
rp_check git-bare-push git_bare_push
rp_report
bfs_unmount
log PASS
