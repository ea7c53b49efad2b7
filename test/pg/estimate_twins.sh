# Twin statements under a generic plan: one spelling the pricing reads without PostGIS, one PostGIS must build, the
# same geometry. $DIR/run.out holds a line "E NAME CASE ESTIMATE" per execution (sourced by envelope_box.t.sh and
# point_box.t.sh, after common.sh).
twin_pairs() {  # twin_pairs READ BUILT: "case estimate case estimate" per case
  paste <(awk -v p="$1" '$1 == "E" && $2 == p { print $3, $4 }' "$DIR/run.out") \
        <(awk -v p="$2" '$1 == "E" && $2 == p { print $3, $4 }' "$DIR/run.out")
}
check_twins() {  # check_twins READ BUILT COUNT: COUNT cases priced, each estimate its twin's, over 5 distinct
  local n bad distinct
  n=$(twin_pairs "$1" "$2" | wc -l)
  bad=$(twin_pairs "$1" "$2" | awk '$1 != $3 || $2 != $4')
  distinct=$(twin_pairs "$1" "$2" | awk '{ print $2 }' | sort -u | wc -l)
  echo "# $1/$2: $n pairs, $distinct distinct estimates${bad:+; differ: $(head -3 <<<"$bad" | tr '\n' ';')}"
  check "$1 = $2: $3 statements priced, every estimate equal to its built twin's" \
    test "$n" -eq "$3" -a -z "$bad" -a "$distinct" -gt 5
}
