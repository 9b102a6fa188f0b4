# moonkv protocol test suite.
#   tclsh tcl-tests/run.tcl --server PATH [--only PATTERN] [--redis|--cluster]
# Runs every tcl-tests/unit/*.tcl. --only takes a glob matched against the
# file name (with or without .tcl) or "file: test name". --redis runs the
# moonkv tests against redis-server instead (to check the harness itself;
# the moonkv-only semantics then fail, as they should). --cluster runs
# them against a gateway in front of a master and two nodes (each test
# server is such a cluster).
# Prints "ok - file: test" / "not ok - file: test: why", a summary, and exits
# 1 on any failure.

set ::tt_dir [file dirname [file normalize [info script]]]
foreach helper {util resp_client server} {
    source [file join $::tt_dir helpers $helper.tcl]
}
set ::tt::root [file dirname $::tt_dir]
set ::tt::server_kind moonkv
set ::tt::server_path ""

proc usage {} {
    puts stderr "usage: tclsh run.tcl --server PATH \[--only PATTERN\] \[--redis|--cluster\]"
    exit 2
}

for {set i 0} {$i < $argc} {incr i} {
    set a [lindex $argv $i]
    switch -- $a {
        --server { set ::tt::server_path [file normalize [lindex $argv [incr i]]] }
        --only   { set ::tt::only [lindex $argv [incr i]] }
        --redis  { set ::tt::server_kind redis }
        --cluster { set ::tt::server_kind cluster }
        default  { usage }
    }
}
if {$::tt::server_kind ne "redis" && ![file executable $::tt::server_path]} {
    puts "not ok - run.tcl: server binary: '$::tt::server_path' is not executable"
    exit 1
}
# Sanitizer builds run several times slower.
if {[string match */san/* $::tt::server_path]} { set ::tt::time_scale 3 }

proc file_selected {path} {
    set only $::tt::only
    if {$only eq ""} { return 1 }
    set name [file tail $path]
    if {[string match $only $name] || [string match $only [file rootname $name]]} {
        return 1
    }
    set f [open $path r]; set text [read $f]; close $f
    foreach {-> tname} [regexp -all -inline -line {^\s*test\s+"([^"]+)"} $text] {
        if {[string match $only "$name: $tname"]} { return 1 }
    }
    return 0
}

set ::tt_t0 [clock milliseconds]
foreach path [lsort [glob -directory [file join $::tt_dir unit] *.tcl]] {
    if {![file_selected $path]} continue
    set ::tt::file [file tail $path]
    set ft0 [clock milliseconds]
    if {[catch {uplevel #0 [list source $path]} err opts]} {
        tt::report 0 "file aborted" "$err ([tt::where $opts])"
    }
    # Servers are stopped by start_server; this only guards leftovers.
    while {[llength $::srv::stack]} {
        set s [lindex $::srv::stack end]
        catch {exec kill -KILL [dict get $s pid]}
        if {[dict exists $s parts]} {
            foreach p [dict get $s parts] { catch {exec kill -KILL [dict get $p pid]} }
        }
        set ::srv::stack [lrange $::srv::stack 0 end-1]
    }
    puts "# $::tt::file: [expr {([clock milliseconds] - $ft0) / 1000.0}] s"
}
set secs [expr {([clock milliseconds] - $::tt_t0) / 1000.0}]
puts "# [expr {$::tt::passed + $::tt::failed}] tests, $::tt::passed passed ($::tt::skipped skipped), $::tt::failed failed in $secs s"
foreach f $::tt::failures { puts "#   failed: $f" }
exit [expr {$::tt::failed > 0}]
